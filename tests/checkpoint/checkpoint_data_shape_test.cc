// state.json's record of the data a checkpoint trained on (data_shape,
// classes, loss): written, read back, checked; and CheckpointFitsData,
// which refuses other data naming both shapes (exit 2).
#include "worker/checkpoint/checkpoint_data_shape.h"

#include <gtest/gtest.h>

#include "common/run_dir/checkpoint_state.h"

namespace mirrored {
namespace {

CheckpointState State() {
  CheckpointState s;
  s.step = 3;
  s.model = "mlp";
  s.data_shape = {32, 32, 3};
  s.classes = 7;
  s.loss = "mse";
  return s;
}

TEST(CheckpointDataShape, StateRecordsTheDataShapeClassesAndLoss) {
  const CheckpointState s = State();
  const nlohmann::json json = s.ToJson();
  EXPECT_EQ(json["data_shape"], nlohmann::json({32, 32, 3}));
  EXPECT_EQ(json["classes"], 7);
  EXPECT_EQ(json["loss"], "mse");
  auto back = CheckpointState::FromJsonText(s.ToJsonText(), "state.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, s);
  // Earlier versions wrote none of them.
  CheckpointState old = s;
  old.data_shape.clear(), old.classes = 0, old.loss.clear();
  EXPECT_FALSE(old.ToJson().contains("data_shape"));
  EXPECT_FALSE(old.ToJson().contains("loss"));
  nlohmann::json bad = json;
  bad["data_shape"] = {32, 0, 3};
  EXPECT_NE(CheckpointState::FromJson(bad, "state.json").status().message().find(
                "data_shape is not [height, width, channels] of positive sizes"),
            std::string::npos);
  bad["data_shape"] = "32x32x3";
  EXPECT_NE(CheckpointState::FromJson(bad, "state.json").status().message().find("\"data_shape\" is not an array"),
            std::string::npos);
}

TEST(CheckpointDataShape, FitsOnlyTheDataItTrainedOn) {
  const CheckpointInfo info{.step = 3, .dir = "run/checkpoints/ckpt-3", .state = State()};
  EXPECT_TRUE(CheckpointFitsData(info, {32, 32, 3}, 7, "--data d").ok());
  const Status other = CheckpointFitsData(info, {20, 20, 1}, 7, "--data d");
  EXPECT_EQ(ExitCodeFor(other), 2);
  EXPECT_EQ(other.message(),
            "--data d gives 20x20x1 images in 7 classes, but run/checkpoints/ckpt-3 was trained on 32x32x3 images "
            "in 7 classes (its state.json): give the data it was trained on, or use another --run-dir");
  EXPECT_FALSE(CheckpointFitsData(info, {32, 32, 3}, 6, "--data d").ok());
  CheckpointInfo old = info;
  old.state.data_shape.clear();  // an earlier version's: nothing to check
  EXPECT_TRUE(CheckpointFitsData(old, {20, 20, 1}, 3, "--data d").ok());
}

}  // namespace
}  // namespace mirrored
