// Everything that can be called: script functions and declarations, builtins,
// host functions, bound methods.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "interp/Ast.h"
#include "interp/Object.h"

namespace meshflow::interp {

class Evaluator;
class Environment;

/// The arguments of one call as written, with their spans for diagnostics.
struct Arguments {
  struct Entry {
    std::optional<std::string> name;
    Value value;
    SourceSpan span;
  };
  std::vector<Entry> entries;
  SourceSpan callSpan;
};

struct ParamSpec {
  std::string name;
  std::optional<Value> defaultValue;  // nullopt: required
};

/// Arguments matched to parameters: one value per parameter (defaults filled
/// in), plus what a variadic function received beyond them.
struct BoundArgs {
  std::vector<Value> values;
  std::vector<SourceSpan> spans;  // where each value came from (the call if defaulted)
  std::vector<Value> rest;
  std::vector<SourceSpan> restSpans;
  SourceSpan callSpan;

  const Value& operator[](std::size_t i) const { return values[i]; }
};

/// Matches `args` to `params` by position then by keyword. Reports too many or
/// too few arguments, unknown keywords and duplicates as diagnostics at the
/// offending argument. Missing parameters with a default get nullopt, so a
/// script function can evaluate its defaults in the call's scope.
std::vector<std::optional<Value>> matchArguments(const std::string& function,
                                                 const std::vector<std::string>& params,
                                                 const std::vector<bool>& required,
                                                 const Arguments& args, bool variadic,
                                                 std::vector<SourceSpan>* spans,
                                                 std::vector<Value>* rest,
                                                 std::vector<SourceSpan>* restSpans);

class Callable : public Object {
 public:
  virtual std::string name() const = 0;
  virtual Value call(Evaluator& evaluator, const Arguments& args) = 0;
  std::string typeName() const override { return "function"; }
  std::string repr(int) const override { return "<" + typeName() + " " + name() + ">"; }
};

/// A function implemented in C++.
class Builtin final : public Callable {
 public:
  using Body = std::function<Value(Evaluator&, BoundArgs&)>;
  Builtin(std::string name, std::vector<ParamSpec> params, Body body, bool variadic = false)
      : name_(std::move(name)), params_(std::move(params)), body_(std::move(body)),
        variadic_(variadic) {}
  std::string name() const override { return name_; }
  std::string typeName() const override { return "builtin"; }
  Value call(Evaluator& evaluator, const Arguments& args) override;
  const std::vector<ParamSpec>& params() const { return params_; }

 private:
  std::string name_;
  std::vector<ParamSpec> params_;
  Body body_;
  bool variadic_;
};

/// A `fn`, `layer`, `model` or `cluster` declared in a script. It keeps its
/// program alive (the declaration points into it) and the scope it closes over.
class ScriptFunction final : public Callable {
 public:
  ScriptFunction(std::shared_ptr<const ast::Program> program, const ast::FunctionDecl* decl,
                 std::shared_ptr<Environment> closure)
      : program_(std::move(program)), decl_(decl), closure_(std::move(closure)) {}
  std::string name() const override { return decl_->name; }
  std::string typeName() const override;
  Value call(Evaluator& evaluator, const Arguments& args) override;
  void clearReferences() override { closure_.reset(); }
  bool holdsReferences() const override { return true; }

  const ast::FunctionDecl& decl() const { return *decl_; }
  const std::shared_ptr<Environment>& closure() const { return closure_; }
  /// `name(a, b = …)` as declared.
  std::string signature() const;

 private:
  std::shared_ptr<const ast::Program> program_;
  const ast::FunctionDecl* decl_;
  std::shared_ptr<Environment> closure_;
};

/// A method of a value, bound to it (`xs.append`).
class BoundMethod final : public Callable {
 public:
  BoundMethod(Value receiver, std::shared_ptr<Builtin> method)
      : receiver_(std::move(receiver)), method_(std::move(method)) {}
  std::string name() const override { return receiver_.typeName() + "." + method_->name(); }
  std::string typeName() const override { return "method"; }
  Value call(Evaluator& evaluator, const Arguments& args) override;
  void clearReferences() override { receiver_ = Value(); }
  bool holdsReferences() const override { return true; }

 private:
  Value receiver_;
  std::shared_ptr<Builtin> method_;
};

}  // namespace meshflow::interp
