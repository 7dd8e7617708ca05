#include "worker/model/keras_layer_config.h"

#include <cctype>
#include <map>

#include "common/quoted_text.h"
#include "worker/model/layer_graph.h"

namespace mirrored::model {
namespace {

// A layer name becomes tensor names, HDF5 attributes (at most 64 KiB) and
// message text: Keras' own are short identifiers.
constexpr size_t kMaxLayerNameBytes = 1024;

// OK, or why `text` (a layer's name or class) cannot be one: too long, or
// holding a control byte that would garble a terminal or forge a log line.
Status CheckNameText(const std::string& what, const std::string& text) {
  if (text.size() > kMaxLayerNameBytes) {
    return InvalidArgumentError("a layer's " + what + " of " + std::to_string(text.size()) + " bytes (" +
                                QuotedText(text.substr(0, 40)) + "...); mirrored supports up to " +
                                std::to_string(kMaxLayerNameBytes));
  }
  for (unsigned char c : text) {
    if (c < 0x20 || c == 0x7f) {
      return InvalidArgumentError("a layer's " + what + " " + QuotedText(text) +
                                  " holds a control character; mirrored supports printable names");
    }
  }
  return OkStatus();
}

using json = nlohmann::json;

// Reads the fields of one layer's "config", each error naming the layer,
// its class and the field.
class ConfigReader {
 public:
  ConfigReader(const json& config, const KerasLayer& layer)
      : config_(config), where_("layer \"" + layer.name + "\" (" + layer.keras_class + ")") {}

  Status Refuse(const std::string& field, const std::string& why, const std::string& supported) const {
    return InvalidArgumentError(where_ + ": \"" + field + "\" " + why + "; mirrored supports " + supported);
  }
  const json* Find(const std::string& field) const {
    auto it = config_.find(field);
    return it == config_.end() || it->is_null() ? nullptr : &*it;
  }
  StatusOr<int> PositiveInt(const std::string& field) const {
    const json* v = Find(field);
    if (v == nullptr || !v->is_number_integer() || v->get<int64_t>() < 1 || v->get<int64_t>() > (1 << 24))
      return Refuse(field, "is " + Text(v), "a positive integer up to 16777216 (2^24)");
    return int(v->get<int64_t>());
  }
  // An int or a pair [a, a] (Keras' kernel_size, strides, pool_size).
  StatusOr<int> Square(const std::string& field, int if_absent) const {
    const json* v = Find(field);
    if (v == nullptr && if_absent > 0) return if_absent;
    if (v != nullptr && v->is_number_integer() && v->get<int64_t>() >= 1) return int(v->get<int64_t>());
    if (v != nullptr && v->is_array() && v->size() == 2 && (*v)[0].is_number_integer() && (*v)[0] == (*v)[1] &&
        (*v)[0].get<int64_t>() >= 1 && (*v)[0].get<int64_t>() <= (1 << 16))
      return int((*v)[0].get<int64_t>());
    return Refuse(field, "is " + Text(v), "square windows: one positive integer or [k, k]");
  }
  StatusOr<float> Number(const std::string& field, float if_absent) const {
    const json* v = Find(field);
    if (v == nullptr) return if_absent;
    if (!v->is_number()) return Refuse(field, "is " + Text(v), "a number");
    return v->get<float>();
  }
  Status Expect(const std::string& field, const json& value, const std::string& supported) const {
    const json* v = Find(field);
    if (v == nullptr || *v == value) return OkStatus();
    return Refuse(field, "is " + Text(v), supported);
  }
  Status MustBeNull(const std::vector<std::string>& fields) const {
    for (const std::string& f : fields)
      if (const json* v = Find(f)) return Refuse(f, "is " + Text(v), "none (null)");
    return OkStatus();
  }
  StatusOr<Init> Initializer(const std::string& field, std::map<std::string, Init> accepted) const {
    const json* v = Find(field);
    if (v == nullptr) return accepted.begin()->second;
    const std::string name = v->is_string()   ? v->get<std::string>()
                             : v->is_object() ? v->value("class_name", std::string())
                                              : std::string();
    for (const auto& [keras_name, init] : accepted)
      if (name == keras_name || name == SnakeCase(keras_name)) return init;
    std::string list;
    for (const auto& [keras_name, init] : accepted) list += (list.empty() ? "" : " or ") + keras_name;
    return Refuse(field, "is " + (name.empty() ? Text(v) : name), list);
  }

  static std::string Text(const json* v) {
    if (v == nullptr) return "missing";
    std::string s = v->dump();
    return s.size() > 80 ? s.substr(0, 77) + "..." : s;
  }

 private:
  static std::string SnakeCase(const std::string& camel) {
    std::string s;
    for (char c : camel) {
      if (std::isupper(static_cast<unsigned char>(c)) && !s.empty()) s += '_';
      s += char(std::tolower(static_cast<unsigned char>(c)));
    }
    return s;
  }

  const json& config_;
  std::string where_;
};

enum class Activation { kLinear, kRelu, kSoftmax };

StatusOr<Activation> ReadActivation(const ConfigReader& r, const std::string& field) {
  const json* v = r.Find(field);
  std::string name = "linear";
  if (v != nullptr) name = v->is_string() ? v->get<std::string>() : v->is_object() ? v->value("config", "?") : "?";
  if (name == "linear") return Activation::kLinear;
  if (name == "relu") return Activation::kRelu;
  if (name == "softmax") return Activation::kSoftmax;
  return r.Refuse(field, "is " + ConfigReader::Text(v), "\"relu\", \"linear\", and \"softmax\" on the output layer");
}

// What every layer may carry: trainable, dtype.
Status CheckCommon(const ConfigReader& r) {
  MIRRORED_RETURN_IF_ERROR(r.Expect("trainable", true, "trainable layers only (true)"));
  if (const json* dtype = r.Find("dtype")) {
    const std::string name = dtype->is_string() ? dtype->get<std::string>()
                             : dtype->contains("config") && (*dtype)["config"].is_object()
                                 ? (*dtype)["config"].value("name", std::string())
                                 : std::string();
    if (name != "float32")
      return r.Refuse("dtype", "is " + ConfigReader::Text(dtype), "float32 (mixed precision: --precision)");
  }
  return r.MustBeNull({"activity_regularizer"});
}

Status ReadWeights(const ConfigReader& r, LayerSpec& s) {
  MIRRORED_ASSIGN_OR_RETURN(s.init, r.Initializer("kernel_initializer", {{"GlorotUniform", Init::kGlorotUniform},
                                                                        {"HeNormal", Init::kHeNormal}}));
  MIRRORED_RETURN_IF_ERROR(r.Initializer("bias_initializer", {{"Zeros", Init::kZeros}}).status());
  MIRRORED_RETURN_IF_ERROR(r.MustBeNull({"kernel_regularizer", "bias_regularizer", "kernel_constraint",
                                         "bias_constraint", "lora_rank"}));
  MIRRORED_ASSIGN_OR_RETURN(Activation act, ReadActivation(r, "activation"));
  s.relu = act == Activation::kRelu;
  return OkStatus();
}

Status ReadDense(const ConfigReader& r, KerasLayer& l) {
  l.spec.kind = LayerKind::kDense;
  MIRRORED_ASSIGN_OR_RETURN(l.spec.units, r.PositiveInt("units"));
  MIRRORED_RETURN_IF_ERROR(r.Expect("use_bias", true, "Dense with a bias (true)"));
  MIRRORED_RETURN_IF_ERROR(ReadWeights(r, l.spec));
  l.softmax_output = ReadActivation(r, "activation").value() == Activation::kSoftmax;
  return OkStatus();
}

Status ReadConv2D(const ConfigReader& r, KerasLayer& l) {
  LayerSpec& s = l.spec;
  s.kind = LayerKind::kConv2D;
  MIRRORED_ASSIGN_OR_RETURN(s.units, r.PositiveInt("filters"));
  MIRRORED_ASSIGN_OR_RETURN(s.kernel, r.Square("kernel_size", 0));
  MIRRORED_ASSIGN_OR_RETURN(s.stride, r.Square("strides", 1));
  const json* padding = r.Find("padding");
  if (padding != nullptr && *padding != "valid" && *padding != "same")
    return r.Refuse("padding", "is " + ConfigReader::Text(padding), "\"valid\" or \"same\"");
  s.same_padding = padding != nullptr && *padding == "same";  // TensorFlow's rule, any kernel (SamePadding)
  MIRRORED_RETURN_IF_ERROR(r.Expect("data_format", "channels_last", "\"channels_last\""));
  StatusOr<int> dilation = r.Square("dilation_rate", 1);
  if (!dilation.ok() || *dilation != 1)
    return r.Refuse("dilation_rate", "is " + ConfigReader::Text(r.Find("dilation_rate")), "[1, 1]");
  MIRRORED_RETURN_IF_ERROR(r.Expect("groups", 1, "1"));
  const json* bias = r.Find("use_bias");
  s.bias = bias == nullptr || *bias == true;
  MIRRORED_RETURN_IF_ERROR(ReadWeights(r, s));
  l.softmax_output = ReadActivation(r, "activation").value() == Activation::kSoftmax;
  return OkStatus();
}

Status ReadPooling(const ConfigReader& r, KerasLayer& l, LayerKind kind) {
  l.spec.kind = kind;
  MIRRORED_ASSIGN_OR_RETURN(l.spec.kernel, r.Square("pool_size", 2));
  MIRRORED_ASSIGN_OR_RETURN(l.spec.stride, r.Square("strides", l.spec.kernel));
  MIRRORED_RETURN_IF_ERROR(r.Expect("padding", "valid", "\"valid\""));
  return r.Expect("data_format", "channels_last", "\"channels_last\"");
}

Status ReadBatchNorm(const ConfigReader& r, KerasLayer& l) {
  l.spec.kind = LayerKind::kBatchNorm;
  const json* axis = r.Find("axis");
  if (axis != nullptr && *axis != -1 && *axis != 3 && *axis != json::array({3}) && *axis != json::array({-1}))
    return r.Refuse("axis", "is " + ConfigReader::Text(axis), "the channel axis (-1 or [3])");
  MIRRORED_ASSIGN_OR_RETURN(l.spec.momentum, r.Number("momentum", 0.99f));
  MIRRORED_ASSIGN_OR_RETURN(l.spec.epsilon, r.Number("epsilon", 1e-3f));
  MIRRORED_RETURN_IF_ERROR(r.Expect("center", true, "center=True"));
  MIRRORED_RETURN_IF_ERROR(r.Expect("scale", true, "scale=True"));
  MIRRORED_RETURN_IF_ERROR(r.Expect("synchronized", false,
                                    "per-replica statistics (synchronized=False; tf.distribute's default)"));
  MIRRORED_RETURN_IF_ERROR(r.Expect("renorm", false, "renorm=False"));
  MIRRORED_RETURN_IF_ERROR(r.Initializer("beta_initializer", {{"Zeros", Init::kZeros}}).status());
  MIRRORED_RETURN_IF_ERROR(r.Initializer("gamma_initializer", {{"Ones", Init::kOnes}}).status());
  MIRRORED_RETURN_IF_ERROR(r.Initializer("moving_mean_initializer", {{"Zeros", Init::kZeros}}).status());
  MIRRORED_RETURN_IF_ERROR(r.Initializer("moving_variance_initializer", {{"Ones", Init::kOnes}}).status());
  return r.MustBeNull({"beta_regularizer", "gamma_regularizer", "beta_constraint", "gamma_constraint"});
}

Status ReadRelu(const ConfigReader& r, KerasLayer& l) {
  l.spec.kind = LayerKind::kRelu;
  MIRRORED_RETURN_IF_ERROR(r.MustBeNull({"max_value"}));
  MIRRORED_RETURN_IF_ERROR(r.Expect("negative_slope", 0.0, "0"));
  return r.Expect("threshold", 0.0, "0");
}

Status ReadActivationLayer(const ConfigReader& r, KerasLayer& l) {
  MIRRORED_ASSIGN_OR_RETURN(Activation act, ReadActivation(r, "activation"));
  l.spec.kind = LayerKind::kRelu;
  l.role = act == Activation::kRelu      ? KerasLayer::Role::kLayer
           : act == Activation::kSoftmax ? KerasLayer::Role::kSoftmax
                                         : KerasLayer::Role::kIdentity;
  return OkStatus();
}

Status ReadDropout(const ConfigReader& r, KerasLayer& l) {
  l.spec.kind = LayerKind::kDropout;
  MIRRORED_ASSIGN_OR_RETURN(l.spec.rate, r.Number("rate", -1.f));
  if (!(l.spec.rate >= 0.f && l.spec.rate < 1.f))
    return r.Refuse("rate", "is " + ConfigReader::Text(r.Find("rate")), "a rate in [0, 1)");
  return r.MustBeNull({"noise_shape"});
}

Status ReadRescaling(const ConfigReader& r, KerasLayer& l) {
  l.spec.kind = LayerKind::kRescaling;
  MIRRORED_ASSIGN_OR_RETURN(l.spec.scale, r.Number("scale", 1.f));
  MIRRORED_ASSIGN_OR_RETURN(l.spec.offset, r.Number("offset", 0.f));
  return OkStatus();
}

Status ReadInput(const ConfigReader& r, KerasLayer& l) {
  l.role = KerasLayer::Role::kInput;
  const json* shape = r.Find("batch_shape");                 // Keras 3
  if (shape == nullptr) shape = r.Find("batch_input_shape");  // Keras 2
  if (shape == nullptr) return r.Refuse("batch_shape", "is missing", "an input shape");
  MIRRORED_ASSIGN_OR_RETURN(l.input, KerasBatchShape(*shape, "layer \"" + l.name + "\" (InputLayer)"));
  return r.Expect("sparse", false, "dense inputs (false)");
}

using Reader = Status (*)(const ConfigReader&, KerasLayer&);

const std::map<std::string, Reader>& Readers() {
  static const std::map<std::string, Reader> readers{
      {"InputLayer", ReadInput},
      {"Dense", ReadDense},
      {"Conv2D", ReadConv2D},
      {"MaxPooling2D", [](const ConfigReader& r, KerasLayer& l) { return ReadPooling(r, l, LayerKind::kMaxPool2D); }},
      {"AveragePooling2D",
       [](const ConfigReader& r, KerasLayer& l) { return ReadPooling(r, l, LayerKind::kAvgPool2D); }},
      {"BatchNormalization", ReadBatchNorm},
      {"ReLU", ReadRelu},
      {"Activation", ReadActivationLayer},
      {"Flatten", [](const ConfigReader& r, KerasLayer& l) {
         l.spec.kind = LayerKind::kFlatten;
         return r.Expect("data_format", "channels_last", "\"channels_last\"");
       }},
      {"GlobalAveragePooling2D", [](const ConfigReader& r, KerasLayer& l) {
         l.spec.kind = LayerKind::kGlobalAvgPool;
         MIRRORED_RETURN_IF_ERROR(r.Expect("keepdims", false, "keepdims=False"));
         return r.Expect("data_format", "channels_last", "\"channels_last\"");
       }},
      {"Add", [](const ConfigReader&, KerasLayer& l) {
         l.spec.kind = LayerKind::kAdd;
         return OkStatus();
       }},
      {"Dropout", ReadDropout},
      {"Rescaling", ReadRescaling},
  };
  return readers;
}

}  // namespace

const char* SupportedKerasLayers() {
  return "InputLayer, Dense, Conv2D, MaxPooling2D, AveragePooling2D, BatchNormalization, ReLU, Activation (relu, "
         "linear, softmax last), Flatten, GlobalAveragePooling2D, Add, Dropout, Rescaling";
}

StatusOr<KerasLayer> ReadKerasLayer(const json& entry) {
  if (!entry.is_object() || !entry.contains("class_name") || !entry["class_name"].is_string() ||
      !entry.contains("config") || !entry["config"].is_object())
    return InvalidArgumentError("a layer is not {\"class_name\": ..., \"config\": {...}}: " +
                                ConfigReader::Text(&entry));
  KerasLayer l;
  l.keras_class = entry["class_name"].get<std::string>();
  const json& config = entry["config"];
  MIRRORED_RETURN_IF_ERROR(CheckNameText("\"class_name\"", l.keras_class));
  l.name = config.value("name", entry.value("name", std::string()));
  if (l.name.empty()) return InvalidArgumentError("a " + l.keras_class + " layer has no \"name\"");
  MIRRORED_RETURN_IF_ERROR(CheckNameText("\"name\"", l.name));
  auto reader = Readers().find(l.keras_class);
  if (reader == Readers().end()) {
    return InvalidArgumentError("layer \"" + l.name + "\" (" + l.keras_class + ") is not supported; mirrored reads " +
                                SupportedKerasLayers());
  }
  ConfigReader r(config, l);
  if (l.keras_class != "InputLayer") MIRRORED_RETURN_IF_ERROR(CheckCommon(r));
  MIRRORED_RETURN_IF_ERROR(reader->second(r, l));
  l.spec.name = l.name;
  l.spec.keras_class = l.keras_class;
  return l;
}

StatusOr<Shape3> KerasBatchShape(const json& shape, const std::string& what) {
  auto dim = [&](size_t i) { return shape[i].is_number_integer() ? shape[i].get<int64_t>() : int64_t(-1); };
  const bool ok = shape.is_array() && shape.size() >= 2 && shape.size() <= 4 && shape[0].is_null();
  for (size_t i = 1; ok && i < shape.size(); ++i)
    if (dim(i) < 1 || dim(i) > (1 << 24)) return InvalidArgumentError(what + ": input shape " + shape.dump() +
                                                                      " has a dimension that is not fixed and positive");
  if (!ok) return InvalidArgumentError(what + ": input shape " + shape.dump() + " is not [null, H, W, C]");
  if (shape.size() == 2) return Shape3{1, 1, int(dim(1))};
  return Shape3{int(dim(1)), int(dim(2)), shape.size() == 4 ? int(dim(3)) : 1};
}

}  // namespace mirrored::model
