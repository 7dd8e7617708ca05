// ArrivalSet: which of N participants have arrived at a barrier, with O(1)
// work per arrival (a bit and a count), so a barrier of 16,384 tasks costs
// no more per task than one of 4. The std::set a timeout message wants is
// built only then.
//
//   ArrivalSet arrived(4);
//   arrived.Insert(2);                          // true: new
//   if (arrived.size() == 4) { /* all here */ }
//   std::set<int> who = arrived.ToSet();        // {2}
#pragma once

#include <cstddef>
#include <set>
#include <vector>

namespace mirrored::coordination {

class ArrivalSet {
 public:
  explicit ArrivalSet(size_t participants = 0) : arrived_(participants, false) {}

  // Marks `index` (0 <= index < participants) arrived; false if it already was.
  bool Insert(int index) {
    if (arrived_[static_cast<size_t>(index)]) return false;
    arrived_[static_cast<size_t>(index)] = true;
    ++count_;
    return true;
  }
  size_t size() const { return count_; }
  bool empty() const { return count_ == 0; }
  std::set<int> ToSet() const {
    std::set<int> out;
    for (size_t i = 0; i < arrived_.size(); ++i) {
      if (arrived_[i]) out.insert(static_cast<int>(i));
    }
    return out;
  }

 private:
  std::vector<bool> arrived_;
  size_t count_ = 0;
};

}  // namespace mirrored::coordination
