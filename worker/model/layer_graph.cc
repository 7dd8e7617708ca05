#include "worker/model/layer_graph.h"

#include <stdexcept>

namespace mirrored::model {
namespace {

std::string ShapeText(Shape3 s) {
  return std::to_string(s.h) + "x" + std::to_string(s.w) + "x" + std::to_string(s.c);
}

}  // namespace

int LayerGraph::AddLayer(std::unique_ptr<Layer> layer, int input) {
  if (input != kGraphInput && (input < 0 || input >= size()))
    throw std::invalid_argument("layer " + layer->name() + ": its input is not an earlier node of " + name());
  Node node;
  node.layer = std::move(layer);
  node.inputs = {input};
  nodes_.push_back(std::move(node));
  return size() - 1;
}

int LayerGraph::AddSum(const std::string& sum_name, std::vector<int> inputs, bool relu) {
  if (inputs.size() < 2) throw std::invalid_argument("layer " + sum_name + ": a sum needs at least two inputs");
  for (int input : inputs) {
    if (input != kGraphInput && (input < 0 || input >= size()))
      throw std::invalid_argument("layer " + sum_name + ": an input is not an earlier node of " + name());
  }
  Node node;
  node.sum_name = sum_name;
  node.inputs = std::move(inputs);
  node.relu = relu;
  node.dy_copies.resize(node.inputs.size() - 1);
  nodes_.push_back(std::move(node));
  return size() - 1;
}

const std::string& LayerGraph::NodeName(int i) const {
  return nodes_[size_t(i)].layer ? nodes_[size_t(i)].layer->name() : nodes_[size_t(i)].sum_name;
}

Shape3 LayerGraph::Build(Shape3 input, ParameterStore* store) {
  if (nodes_.empty()) throw std::invalid_argument(name() + ": the graph has no layers");
  in_ = input;
  input_.out = input;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    Node& node = nodes_[i];
    for (int in : node.inputs) ++(in == kGraphInput ? input_ : nodes_[size_t(in)]).consumers;
    const Shape3 first = node.inputs[0] == kGraphInput ? input : nodes_[size_t(node.inputs[0])].out;
    if (node.layer) {
      node.out = node.layer->Build(first, store);
      continue;
    }
    for (int in : node.inputs) {
      const Shape3 s = in == kGraphInput ? input : nodes_[size_t(in)].out;
      if (!(s == first)) {
        throw std::invalid_argument("layer " + node.sum_name + " (Add) adds " + ShapeText(first) + " and " +
                                    ShapeText(s) + " values: its inputs must have one shape");
      }
    }
    node.out = first;
  }
  for (int i = 0; i + 1 < size(); ++i) {
    if (nodes_[size_t(i)].consumers == 0)
      throw std::invalid_argument("layer " + NodeName(i) + ": its output is not used on the way to the model's output");
  }
  return nodes_.back().out;
}

void LayerGraph::Bind(Backend* backend, ParameterStore* store) {
  backend_ = backend;
  input_.grad.set_backend(backend);
  for (Node& node : nodes_) {
    if (node.layer) node.layer->Bind(backend, store);
    node.sum.set_backend(backend);
    node.grad.set_backend(backend);
    for (DeviceArray& a : node.dy_copies) a.set_backend(backend);
  }
  FoldReluMasks();
}

void LayerGraph::FoldReluMasks() {
  for (Node& node : nodes_) {
    if (!node.layer || node.inputs[0] == kGraphInput) continue;
    Node& in = nodes_[size_t(node.inputs[0])];
    if (in.layer && in.consumers == 1 && in.layer->EndsWithRelu() && node.layer->FoldInputReluMask())
      in.layer->SkipReluMask();
  }
}

void LayerGraph::SetBatchPosition(const BatchPosition& position) {
  for (Node& node : nodes_)
    if (node.layer) node.layer->SetBatchPosition(position);
}

const float* LayerGraph::Forward(int n, const float* x, bool training) {
  for (Node& node : nodes_) {
    const size_t count = size_t(n) * node.out.size();
    // Gradient buffers are reserved here: growing one in Backward would free
    // memory (a device synchronisation) while bucket all-reduces run.
    if (training && node.consumers > 1) node.grad.Reserve(count);
    if (node.layer) {
      node.y = node.layer->Forward(n, Output(node.inputs[0], x), training);
    } else {
      ForwardSum(node, n, x, training);
    }
  }
  if (training && input_.consumers > 1) input_.grad.Reserve(size_t(n) * in_.size());
  return nodes_.back().y;
}

void LayerGraph::ForwardSum(Node& node, int n, const float* x, bool training) {
  const size_t count = size_t(n) * node.out.size();
  if (training)
    for (DeviceArray& a : node.dy_copies) a.Reserve(count);
  float* y = node.sum.Reserve(count);
  // ((in0 + in1) + in2) ...: the same order with or without the ReLU.
  const size_t last = node.inputs.size() - 1;
  const float* sum = Output(node.inputs[0], x);
  if (!node.relu || last > 1) {
    backend_->Copy(sum, y, count);
    sum = y;
  }
  for (size_t k = 1; k < last; ++k) backend_->Accumulate(Output(node.inputs[k], x), y, count);
  if (node.relu) {
    backend_->AddRelu(sum, Output(node.inputs[last], x), y, count);
  } else {
    backend_->Accumulate(Output(node.inputs[last], x), y, count);
  }
  node.y = y;
}

void LayerGraph::Contribute(int slot, float* g, size_t count) {
  Node& node = slot == size() ? input_ : nodes_[size_t(slot)];
  if (node.consumers == 1) {
    node.dy = g;
  } else if (node.received == 0) {
    node.dy = node.grad.data();
    backend_->Copy(g, node.dy, count);
  } else {
    backend_->Accumulate(g, node.dy, count);
  }
  ++node.received;
}

void LayerGraph::BackwardSum(Node& node, int n) {
  const size_t count = size_t(n) * node.out.size();
  if (node.relu) backend_->ReluMask(node.y, node.dy, count);
  // Every input gets dy; layers may overwrite theirs, so each input after
  // the first reads its own copy.
  for (size_t k = node.inputs.size(); k-- > 1;) {
    float* copy = node.dy_copies[k - 1].data();
    backend_->Copy(node.dy, copy, count);
    Contribute(Slot(node.inputs[k]), copy, count);
  }
  Contribute(Slot(node.inputs[0]), node.dy, count);
}

float* LayerGraph::Backward(int n, const float* x, float* dy, bool need_dx, const GradientReadyFn& ready) {
  for (Node& node : nodes_) node.received = 0;
  input_.received = 0;
  input_.dy = nullptr;
  nodes_.back().dy = dy;
  for (int i = size(); i-- > 0;) {
    Node& node = nodes_[size_t(i)];
    if (!node.layer) {
      BackwardSum(node, n);
      continue;
    }
    const int in = node.inputs[0];
    const bool want_dx = in != kGraphInput || need_dx;
    float* dx = node.layer->Backward(n, Output(in, x), node.dy, want_dx, ready);
    const Shape3 in_shape = in == kGraphInput ? in_ : nodes_[size_t(in)].out;
    if (want_dx) Contribute(Slot(in), dx, size_t(n) * in_shape.size());
  }
  return need_dx ? input_.dy : nullptr;
}

}  // namespace mirrored::model
