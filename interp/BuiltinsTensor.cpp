// The primitive tensor ops of LANGUAGE.md. Each records ops into the graph of
// the model being traced; shapes are checked by the IR's shape rules.
#include <fmt/format.h>

#include "interp/Builtins.h"
#include "interp/Evaluator.h"
#include "interp/TensorOps.h"

namespace meshflow::interp {
namespace {

using ir::OpKind;

/// One tensor builtin call: its arguments and the tracer it records into.
struct Call {
  Evaluator& ev;
  BoundArgs& args;
  std::shared_ptr<Tracer> tracer;

  ir::ValueId tensor(std::size_t i, const char* what) const {
    TensorObject* t = asTensor(args[i]);
    if (!t)
      argumentError(args, i, DiagnosticKind::TypeMismatch,
                    fmt::format("{} must be a tensor, not {}", what, args[i].aTypeName()));
    return t->id();
  }
  const ir::TensorType& type(ir::ValueId id) const { return tracer->graph.value(id).type; }
  std::vector<ir::ValueId> record(OpKind kind, std::vector<ir::ValueId> inputs,
                                  ir::Attributes attrs = {}) const {
    return tracer->record(kind, inputs, std::move(attrs), args.callSpan);
  }
  Value value(ir::ValueId id) const { return tensorValue(ev, tracer, id); }
  Value one(OpKind kind, std::vector<ir::ValueId> inputs, ir::Attributes attrs = {}) const {
    return value(record(kind, std::move(inputs), std::move(attrs))[0]);
  }
  std::int64_t positive(std::size_t i, const char* what) const {
    std::int64_t n = intArg(args, i, what);
    if (n < 1) argumentError(args, i, DiagnosticKind::InvalidValue, fmt::format("{} must be >= 1", what));
    return n;
  }
  std::string name(std::size_t i, const char* fallback) const {
    return args[i].isNone() ? fallback : stringArg(args, i, "name");
  }
};

using TensorBody = std::function<Value(const Call&)>;

void defineTensor(Environment& env, const std::string& name, std::vector<ParamSpec> params,
                  TensorBody body) {
  defineBuiltin(env, name, std::move(params), [name, body](Evaluator& ev, BoundArgs& a) {
    return body(Call{ev, a, activeTracer(ev, name + "()")});
  });
}

// Builtins such as tanh, exp and sum take numbers too: a tensor argument
// records an op, anything else goes to the numeric builtin defined before.
void overload(Environment& env, const std::string& name, std::vector<ParamSpec> params,
              TensorBody tensorBody) {
  Value numeric = env.findLocal(name)->value;
  auto body = [name, numeric, tensorBody](Evaluator& ev, BoundArgs& a) -> Value {
    if (asTensor(a[0])) return tensorBody(Call{ev, a, activeTracer(ev, name + "()")});
    Arguments args;
    args.callSpan = a.callSpan;
    for (std::size_t i = 0; i < a.values.size(); ++i)
      if (!(i > 0 && a.values[i].isNone())) args.entries.push_back({std::nullopt, a.values[i], a.spans[i]});
    return ev.call(numeric, args);
  };
  auto builtin = std::make_shared<Builtin>(name, std::move(params), body);
  env.findLocal(name)->value = Value::object(ValueKind::Callable, std::move(builtin));
}

std::vector<std::int64_t> intList(const BoundArgs& a, std::size_t i, const char* what) {
  std::vector<std::int64_t> out;
  if (a[i].isInt()) return {a[i].asInt()};
  if (a[i].kind() != ValueKind::List && a[i].kind() != ValueKind::Range)
    argumentError(a, i, DiagnosticKind::TypeMismatch, fmt::format("{} must be a list of ints", what));
  if (a[i].kind() == ValueKind::Range) {
    const auto& r = static_cast<const RangeObject&>(*a[i].object());
    for (std::int64_t k = 0; k < r.size(); ++k) out.push_back(r.at(k));
    return out;
  }
  for (const auto& item : a[i].items()) {
    if (!item.isInt())
      argumentError(a, i, DiagnosticKind::TypeMismatch, fmt::format("{} must be a list of ints", what));
    out.push_back(item.asInt());
  }
  return out;
}

// Negative axes count from the end, as in NumPy.
std::vector<std::int64_t> axesOf(const Call& c, std::size_t i, ir::ValueId x) {
  auto rank = static_cast<std::int64_t>(c.type(x).rank());
  std::vector<std::int64_t> axes;
  if (c.args[i].isNone()) {
    for (std::int64_t k = 0; k < rank; ++k) axes.push_back(k);
    return axes;
  }
  for (std::int64_t axis : intList(c.args, i, "axes")) axes.push_back(axis < 0 ? axis + rank : axis);
  return axes;
}

Value dtypeValue(ir::DType dtype) {
  return Value::object(ValueKind::Object, std::make_shared<DTypeObject>(dtype));
}

// A floating-point dtype argument such as `f16`: the precision a layer keeps
// its parameters in.
ir::DType floatDType(BoundArgs& args, std::size_t i) {
  auto* d = args[i].kind() == ValueKind::Object ? dynamic_cast<DTypeObject*>(args[i].object().get())
                                                : nullptr;
  bool isFloat = d && (d->dtype == ir::DType::F32 || d->dtype == ir::DType::F16 ||
                       d->dtype == ir::DType::BF16);
  if (!isFloat)
    argumentError(args, i, DiagnosticKind::TypeMismatch,
                  fmt::format("dtype must be f32, f16 or bf16, not {}",
                              d ? ir::dtypeName(d->dtype) : args[i].aTypeName()));
  return d->dtype;
}

Value input(const Call& c) {
  const std::string& name = stringArg(c.args, 0, "the input's name");
  auto* type = c.args[1].kind() == ValueKind::Object
                   ? dynamic_cast<TensorTypeObject*>(c.args[1].object().get())
                   : nullptr;
  if (!type)
    argumentError(c.args, 1, DiagnosticKind::TypeMismatch,
                  fmt::format("the input's type must be a tensor type such as f32[batch, 128], not {}",
                              c.args[1].aTypeName()));
  for (ir::ValueId existing : c.tracer->graph.inputs())
    if (c.tracer->graph.value(existing).name == name)
      argumentError(c.args, 0, DiagnosticKind::Redefinition,
                    fmt::format("the model already has an input named '{}'", name));
  ir::ValueId value = c.tracer->input(name, type->type, c.args.callSpan);
  return c.value(value);
}

Value parameter(const Call& c) {
  const std::string& name = stringArg(c.args, 0, "the parameter's name");
  auto* type = c.args[1].kind() == ValueKind::Object
                   ? dynamic_cast<TensorTypeObject*>(c.args[1].object().get())
                   : nullptr;
  if (!type || !type->type.concrete())
    argumentError(c.args, 1, DiagnosticKind::TypeMismatch,
                  "a parameter's type is a tensor type without `batch`, such as f32[1024, 64]");
  const std::string& init = stringArg(c.args, 2, "init");
  if (init != "normal" && init != "zeros" && init != "ones")
    argumentError(c.args, 2, DiagnosticKind::InvalidValue,
                  "init must be \"normal\", \"zeros\" or \"ones\"");
  double stddev = numberArg(c.args, 3, "std");
  return c.value(c.tracer->parameter(name, type->type, init, stddev, c.args.callSpan));
}

Value linear(const Call& c) {
  ir::ValueId x = c.tensor(0, "linear()'s input");
  std::int64_t features = c.positive(1, "the number of output features");
  const ir::TensorType xt = c.type(x);  // a copy: recording ops may move the graph's values
  if (xt.rank() == 0)
    argumentError(c.args, 0, DiagnosticKind::ShapeMismatch, "linear() needs a tensor of rank >= 1");
  ir::Dim in = xt.shape.back();
  if (in.perBatch)
    argumentError(c.args, 0, DiagnosticKind::ShapeMismatch,
                  fmt::format("linear()'s input features cannot depend on the batch: {}", xt.text()));
  c.tracer->enter(c.name(2, "linear"));
  struct Leave {
    Tracer& t;
    ~Leave() { t.leave(); }
  } leave{*c.tracer};
  ir::ValueId w = c.tracer->parameter(
      "weight", {xt.dtype, {in, ir::Dim::constant(features)}}, "normal", 0.02, c.args.callSpan);
  ir::ValueId y = c.record(OpKind::MatMul, {x, w})[0];
  bool bias = c.args[3].isBool() ? c.args[3].asBool() : true;
  if (!bias) return c.value(y);
  ir::ValueId b = c.tracer->parameter("bias", {xt.dtype, {ir::Dim::constant(features)}}, "zeros", 0,
                                      c.args.callSpan);
  return c.one(OpKind::Add, {y, b});
}

Value layerNorm(const Call& c) {
  ir::ValueId x = c.tensor(0, "layer_norm()'s input");
  const ir::TensorType xt = c.type(x);  // a copy: recording ops may move the graph's values
  if (xt.rank() == 0)
    argumentError(c.args, 0, DiagnosticKind::ShapeMismatch, "layer_norm() needs a tensor of rank >= 1");
  double eps = numberArg(c.args, 2, "eps");
  c.tracer->enter(c.name(1, "layer_norm"));
  struct Leave {
    Tracer& t;
    ~Leave() { t.leave(); }
  } leave{*c.tracer};
  ir::TensorType param{xt.dtype, {xt.shape.back()}};
  ir::ValueId gamma = c.tracer->parameter("gamma", param, "ones", 0, c.args.callSpan);
  ir::ValueId beta = c.tracer->parameter("beta", param, "zeros", 0, c.args.callSpan);
  return c.one(OpKind::LayerNorm, {x, gamma, beta}, {{"eps", eps}});
}

Value embedding(const Call& c) {
  ir::ValueId ids = c.tensor(0, "embedding()'s ids");
  std::int64_t vocab = c.positive(1, "the vocabulary size");
  std::int64_t hidden = c.positive(2, "the embedding size");
  ir::DType dtype = floatDType(c.args, 4);
  c.tracer->enter(c.name(3, "embedding"));
  struct Leave {
    Tracer& t;
    ~Leave() { t.leave(); }
  } leave{*c.tracer};
  ir::ValueId table = c.tracer->parameter(
      "table", {dtype, {ir::Dim::constant(vocab), ir::Dim::constant(hidden)}}, "normal",
      0.02, c.args.callSpan);
  return c.one(OpKind::Embedding, {table, ids});
}

Value split(const Call& c) {
  ir::ValueId x = c.tensor(0, "split()'s input");
  auto rank = static_cast<std::int64_t>(c.type(x).rank());
  std::int64_t axis = intArg(c.args, 2, "axis");
  if (axis < 0) axis += rank;
  std::vector<std::int64_t> sizes;
  if (c.args[1].isInt()) {
    // split(x, n) cuts the axis into n equal parts.
    std::int64_t parts = c.positive(1, "the number of parts");
    if (axis < 0 || axis >= rank || c.type(x).shape[axis].perBatch ||
        c.type(x).shape[axis].value % parts != 0)
      argumentError(c.args, 1, DiagnosticKind::ShapeMismatch,
                    fmt::format("cannot split axis {} of {} into {} equal parts", axis,
                                c.type(x).text(), parts));
    sizes.assign(parts, c.type(x).shape[axis].value / parts);
  } else {
    sizes = intList(c.args, 1, "the sizes");
  }
  std::vector<Value> parts;
  for (ir::ValueId id : c.record(OpKind::Split, {x}, {{"axis", axis}, {"sizes", sizes}}))
    parts.push_back(c.value(id));
  return c.ev.makeList(std::move(parts));
}

Value concat(const Call& c) {
  if (c.args[0].kind() != ValueKind::List || c.args[0].items().empty())
    argumentError(c.args, 0, DiagnosticKind::TypeMismatch, "concat() takes a non-empty list of tensors");
  std::vector<ir::ValueId> inputs;
  for (const auto& item : c.args[0].items()) {
    TensorObject* t = asTensor(item);
    if (!t) argumentError(c.args, 0, DiagnosticKind::TypeMismatch, "concat() takes a list of tensors");
    inputs.push_back(t->id());
  }
  std::int64_t axis = intArg(c.args, 1, "axis");
  if (axis < 0) axis += static_cast<std::int64_t>(c.type(inputs[0]).rank());
  return c.one(OpKind::Concat, inputs, {{"axis", axis}});
}

void defineUnary(Environment& env, const char* name, OpKind kind) {
  defineTensor(env, name, {{"x", {}}}, [kind, name](const Call& c) {
    return c.one(kind, {c.tensor(0, fmt::format("{}()'s input", name).c_str())});
  });
}

void defineBinary(Environment& env, const char* name, OpKind kind) {
  defineTensor(env, name, {{"a", {}}, {"b", {}}}, [kind](const Call& c) {
    return c.one(kind, {c.tensor(0, "the first operand"), c.tensor(1, "the second operand")});
  });
}

}  // namespace

void installTensorBuiltins(Environment& env) {
  for (ir::DType d : {ir::DType::F32, ir::DType::F16, ir::DType::BF16, ir::DType::I32, ir::DType::I64})
    env.define(ir::dtypeName(d), Binding{dtypeValue(d), false, {}});
  defineTensor(env, "input", {{"name", {}}, {"type", {}}}, input);
  defineTensor(env, "parameter",
               {{"name", {}}, {"type", {}}, {"init", Value::string("normal")}, {"std", Value::number(0.02)}},
               parameter);
  defineTensor(env, "linear",
               {{"x", {}}, {"features", {}}, {"name", Value()}, {"bias", Value::boolean(true)}},
               linear);
  defineTensor(env, "layer_norm", {{"x", {}}, {"name", Value()}, {"eps", Value::number(1e-5)}},
               layerNorm);
  defineTensor(env, "embedding",
               {{"ids", {}}, {"vocab", {}}, {"hidden", {}}, {"name", Value()},
                {"dtype", dtypeValue(ir::DType::F32)}},
               embedding);
  defineTensor(env, "matmul", {{"a", {}}, {"b", {}}, {"transpose_b", Value::boolean(false)}},
               [](const Call& c) {
                 ir::Attributes attrs;
                 if (c.args[2].isBool() && c.args[2].asBool()) attrs["transpose_b"] = std::int64_t{1};
                 return c.one(OpKind::MatMul, {c.tensor(0, "matmul()'s a"), c.tensor(1, "matmul()'s b")},
                              attrs);
               });
  defineBinary(env, "add", OpKind::Add);
  defineBinary(env, "sub", OpKind::Sub);
  defineBinary(env, "mul", OpKind::Mul);
  defineBinary(env, "div", OpKind::Div);
  defineUnary(env, "neg", OpKind::Neg);
  defineUnary(env, "relu", OpKind::Relu);
  defineUnary(env, "gelu", OpKind::Gelu);
  defineUnary(env, "sigmoid", OpKind::Sigmoid);
  defineUnary(env, "softmax", OpKind::Softmax);
  defineUnary(env, "causal_mask", OpKind::CausalMask);
  defineUnary(env, "merge_heads", OpKind::MergeHeads);
  overload(env, "tanh", {{"x", {}}}, [](const Call& c) { return c.one(OpKind::Tanh, {c.tensor(0, "x")}); });
  overload(env, "exp", {{"x", {}}}, [](const Call& c) { return c.one(OpKind::Exp, {c.tensor(0, "x")}); });
  overload(env, "sum", {{"values", {}}, {"start", Value()}, {"axes", Value()}}, [](const Call& c) {
    ir::ValueId x = c.tensor(0, "x");
    return c.one(OpKind::Sum, {x}, {{"axes", axesOf(c, c.args[2].isNone() ? 1 : 2, x)}});
  });
  defineTensor(env, "mean", {{"x", {}}, {"axes", Value()}}, [](const Call& c) {
    ir::ValueId x = c.tensor(0, "mean()'s input");
    return c.one(OpKind::Mean, {x}, {{"axes", axesOf(c, 1, x)}});
  });
  defineTensor(env, "rsqrt", {{"x", {}}, {"eps", Value::number(0)}}, [](const Call& c) {
    double eps = numberArg(c.args, 1, "eps");
    if (!(eps >= 0)) argumentError(c.args, 1, DiagnosticKind::InvalidValue, "rsqrt's eps must be >= 0");
    return c.one(OpKind::Rsqrt, {c.tensor(0, "rsqrt()'s input")}, {{"eps", eps}});
  });
  defineTensor(env, "scale", {{"x", {}}, {"factor", {}}}, [](const Call& c) {
    return c.one(OpKind::Scale, {c.tensor(0, "scale()'s input")}, {{"factor", numberArg(c.args, 1, "factor")}});
  });
  defineTensor(env, "cross_entropy", {{"logits", {}}, {"labels", {}}}, [](const Call& c) {
    return c.one(OpKind::CrossEntropy, {c.tensor(0, "the logits"), c.tensor(1, "the labels")});
  });
  defineTensor(env, "reshape", {{"x", {}}, {"shape", {}}}, [](const Call& c) {
    return c.one(OpKind::Reshape, {c.tensor(0, "reshape()'s input")}, {{"shape", intList(c.args, 1, "the shape")}});
  });
  defineTensor(env, "transpose", {{"x", {}}, {"perm", {}}}, [](const Call& c) {
    return c.one(OpKind::Transpose, {c.tensor(0, "transpose()'s input")}, {{"perm", intList(c.args, 1, "perm")}});
  });
  defineTensor(env, "concat", {{"tensors", {}}, {"axis", Value::integer(-1)}}, concat);
  defineTensor(env, "split", {{"x", {}}, {"sizes", {}}, {"axis", Value::integer(-1)}}, split);
  defineTensor(env, "dropout", {{"x", {}}, {"p", Value::number(0.1)}, {"seed", Value::integer(0)}},
               [](const Call& c) {
                 double p = numberArg(c.args, 1, "p");
                 if (!(p >= 0 && p < 1))
                   argumentError(c.args, 1, DiagnosticKind::InvalidValue, "dropout's p must be in [0, 1)");
                 return c.one(OpKind::Dropout, {c.tensor(0, "dropout()'s input")},
                              {{"p", p}, {"seed", intArg(c.args, 2, "seed")}});
               });
  defineTensor(env, "split_heads", {{"x", {}}, {"heads", {}}}, [](const Call& c) {
    return c.one(OpKind::SplitHeads, {c.tensor(0, "split_heads()'s input")},
                 {{"heads", c.positive(1, "heads")}});
  });
  defineTensor(env, "top_k_gate", {{"logits", {}}, {"k", {}}}, [](const Call& c) {
    return c.one(OpKind::TopKGate, {c.tensor(0, "the gate logits")}, {{"k", c.positive(1, "k")}});
  });
  // Mixture of experts with a capacity (docs/models.md): tokens into expert
  // slots, slots back to tokens, and how many choices the capacity dropped.
  defineTensor(
      env, "moe_dispatch", {{"x", {}}, {"gates", {}}, {"capacity", {}}}, [](const Call& c) {
        return c.one(OpKind::MoeDispatch, {c.tensor(0, "the tokens"), c.tensor(1, "the gates")},
                     {{"capacity", c.positive(2, "capacity")}});
      });
  defineTensor(env, "moe_combine", {{"y", {}}, {"gates", {}}, {"capacity", {}}}, [](const Call& c) {
    return c.one(OpKind::MoeCombine,
                 {c.tensor(0, "the experts' outputs"), c.tensor(1, "the gates")},
                 {{"capacity", c.positive(2, "capacity")}});
  });
  defineTensor(env, "moe_dropped", {{"gates", {}}, {"capacity", {}}}, [](const Call& c) {
    return c.one(OpKind::MoeDropped, {c.tensor(0, "the gates")},
                 {{"capacity", c.positive(1, "capacity")}});
  });
  defineTensor(env, "select", {{"x", {}}, {"index", {}}}, [](const Call& c) {
    ir::ValueId x = c.tensor(0, "select()'s input");
    auto rank = static_cast<std::int64_t>(c.type(x).rank());
    return c.one(OpKind::Select, {x}, {{"axis", rank - 1}, {"index", intArg(c.args, 1, "index")}});
  });
}

}  // namespace meshflow::interp
