// A directed acyclic graph of layers with one input and one output: what a
// Keras Functional model is (branches joined by Add), and a Sequential one
// as the special case of a chain. Nodes are added in topological order:
// each reads the graph's input (kGraphInput) or earlier nodes; the last
// node is the output. A node is a Layer (one input) or a sum of two or more
// nodes (Keras' Add), optionally followed by a ReLU in the same pass (a
// residual block's join). Parameters are declared in node order and
// Backward walks the nodes in reverse, so gradients are reported in
// strictly decreasing parameter index, as the Layer contract asks.
//
//   LayerGraph g("resnet_cifar");
//   int c = g.AddLayer(std::make_unique<Conv2DLayer>("conv", opts), LayerGraph::kGraphInput);
//   int s = g.AddSum("add", {c, LayerGraph::kGraphInput});   // then Build, Bind, Forward, Backward
#pragma once

#include <memory>
#include <vector>

#include "worker/model/device_array.h"
#include "worker/model/layer.h"

namespace mirrored::model {

class LayerGraph final : public Layer {
 public:
  static constexpr int kGraphInput = -1;

  explicit LayerGraph(std::string name) : Layer(std::move(name)) {}

  // Add a node reading `input` (an earlier node, or kGraphInput); returns
  // its index. std::invalid_argument for an input that is not earlier.
  int AddLayer(std::unique_ptr<Layer> layer, int input);
  // y = the sum of `inputs` (two or more, all of one shape, checked by
  // Build); with `relu`, y = max(sum, 0): an Add and the ReLU that alone
  // reads it, in one pass over the values instead of two.
  int AddSum(const std::string& name, std::vector<int> inputs, bool relu = false);
  int size() const { return int(nodes_.size()); }

  // std::invalid_argument naming the node: a sum of unequal shapes, a node
  // whose output nothing reads (but the last), an empty graph.
  Shape3 Build(Shape3 input, ParameterStore* store) override;
  void Bind(Backend* backend, ParameterStore* store) override;
  const float* Forward(int n, const float* x, bool training) override;
  float* Backward(int n, const float* x, float* dy, bool need_dx, const GradientReadyFn& ready) override;
  void SetBatchPosition(const BatchPosition& position) override;

 private:
  // Per node (and one more slot for the graph's input, at index size()).
  struct Node {
    std::unique_ptr<Layer> layer;  // null: a sum
    std::string sum_name;
    std::vector<int> inputs;
    bool relu = false;             // a sum followed by max(., 0)
    Shape3 out;
    int consumers = 0;             // edges reading this node
    const float* y = nullptr;      // last Forward's output
    float* dy = nullptr;           // gradient gathered so far in Backward
    int received = 0;              // contributions to dy so far
    DeviceArray sum, grad;         // a sum's output; dy when several consumers add into it
    std::vector<DeviceArray> dy_copies;  // a sum's dy for its 2nd, 3rd... input
  };

  int Slot(int input) const { return input == kGraphInput ? int(nodes_.size()) : input; }
  const std::string& NodeName(int i) const;
  const float* Output(int input, const float* x) const { return input == kGraphInput ? x : nodes_[input].y; }
  // Adds gradient `g` (which the caller gives up) to slot `slot`'s dy.
  void Contribute(int slot, float* g, size_t count);
  void ForwardSum(Node& node, int n, const float* x, bool training);
  void BackwardSum(Node& node, int n);
  // Layer::SkipReluMask for each layer ending with a ReLU whose only
  // reader, a layer, takes the mask into its Backward (Layer::FoldInputReluMask).
  void FoldReluMasks();

  std::vector<Node> nodes_;
  Node input_;  // the graph's input as a slot: its consumers and dy
  Shape3 in_;
  Backend* backend_ = nullptr;
};

}  // namespace mirrored::model
