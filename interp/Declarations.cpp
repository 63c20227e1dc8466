#include "interp/Declarations.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>

#include "interp/Evaluator.h"
#include "interp/Handles.h"
#include "ir/EditDistance.h"

namespace meshflow::interp {
namespace {

struct Entry {
  std::string name;
  Value value;
  SourceSpan span;
};

[[noreturn]] void invalid(std::string message, const SourceSpan& span) {
  failAt(DiagnosticKind::InvalidDeclaration, std::move(message), span);
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

bool isKind(const Value& value, std::initializer_list<const char*> kinds) {
  if (value.kind() != ValueKind::Record) return false;
  Value kind = value.field("kind");
  return std::any_of(kinds.begin(), kinds.end(),
                     [&](const char* k) { return kind.isString() && kind.asString() == k; });
}

void requirePositiveInt(const Entry& e, bool allowAuto) {
  if (allowAuto && e.value.kind() == ValueKind::Auto) return;
  if (!e.value.isInt() || e.value.asInt() < 1)
    invalid(fmt::format("'{}' must be a positive int{}, not {}", e.name,
                        allowAuto ? " or auto" : "", e.value.repr()),
            e.span);
}

void requireBool(const Entry& e) {
  if (e.value.kind() == ValueKind::Auto || e.value.isBool()) return;
  invalid(fmt::format("'{}' must be true, false or auto, not {}", e.name, e.value.repr()), e.span);
}

void requireChoice(const Entry& e, const std::vector<std::string>& choices) {
  if (e.value.kind() == ValueKind::Auto) return;
  if (e.value.isString() &&
      std::find(choices.begin(), choices.end(), e.value.asString()) != choices.end())
    return;
  std::vector<std::string> quoted;
  for (const auto& c : choices) quoted.push_back("\"" + c + "\"");
  invalid(fmt::format("'{}' must be one of {} or auto, not {}", e.name, joined(quoted), e.value.repr()),
          e.span);
}

// A top-level `name = value` statement of a declaration body is an entry;
// other statements (let, if, print …) run as usual, and with `values` given,
// expression statements hand their value back (a schedule's pin(...) calls).
std::optional<Entry> runBodyStatement(Evaluator& evaluator, const ast::Stmt& statement,
                                      const std::shared_ptr<Environment>& env, const char* what,
                                      std::vector<Entry>& entries, std::vector<Value>* values) {
  if (statement.kind == ast::StmtKind::Assign) {
    const auto& assign = static_cast<const ast::AssignStmt&>(statement);
    if (assign.target->kind == ast::ExprKind::Name && !assign.op) {
      const auto& name = static_cast<const ast::NameRef&>(*assign.target).name;
      for (const auto& earlier : entries)
        if (earlier.name == name)
          failAt(DiagnosticKind::Redefinition,
                 fmt::format("'{}' is set twice in this {}", name, what), assign.target->span);
      return Entry{name, evaluator.eval(*assign.value, env), assign.span};
    }
  }
  if (statement.kind == ast::StmtKind::Expr && values) {
    evaluator.step();
    values->push_back(evaluator.eval(*static_cast<const ast::ExprStmt&>(statement).expr, env));
    return std::nullopt;
  }
  if (evaluator.exec(statement, env) != Evaluator::Flow::Normal)
    failAt(DiagnosticKind::MisplacedStatement,
           fmt::format("a {} body sets entries; it cannot return or leave it early", what),
           statement.span);
  return std::nullopt;
}

// ---- clusters ----

const Entry* findEntry(const std::vector<Entry>& entries, const std::string& name) {
  for (const auto& e : entries)
    if (e.name == name) return &e;
  return nullptr;
}


const std::vector<std::string> kClusterFields = {"nodes", "devices_per_node", "device",
                                                 "intra_node", "inter_node"};

void validateClusterEntry(const Entry& e) {
  if (e.name == "nodes" || e.name == "devices_per_node") return requirePositiveInt(e, false);
  if (e.name == "device") {
    if (!isKind(e.value, {"gpu", "cpu"}))
      invalid(fmt::format("'device' must be a device such as gpu(...), not {}", e.value.repr()),
              e.span);
    return;
  }
  if (!isKind(e.value, {"link"}))
    invalid(fmt::format("'{}' must be a link(bandwidth = ..., latency = ...), not {}", e.name,
                        e.value.repr()),
            e.span);
}

}  // namespace

Value makeModel(Evaluator& evaluator, ScriptFunction& model, const std::shared_ptr<Environment>& env) {
  Fields args;
  for (const auto& param : model.decl().params)
    args.emplace_back(param.name, env->findLocal(param.name)->value);
  auto object = std::make_shared<ModelObject>(
      std::static_pointer_cast<ScriptFunction>(model.shared_from_this()), std::move(args));
  evaluator.heap().adopt(object, kObjectOverhead);
  return Value::object(ValueKind::Object, std::move(object));
}

Value evalCluster(Evaluator& evaluator, ScriptFunction& cluster,
                  const std::shared_ptr<Environment>& env) {
  const auto& decl = cluster.decl();
  auto scope = std::make_shared<Environment>(env);
  std::vector<Entry> entries;
  for (const auto& statement : decl.body.statements)
    if (auto entry = runBodyStatement(evaluator, *statement, scope, "cluster", entries, nullptr))
      entries.push_back(std::move(*entry));
  Fields fields;
  for (const auto& e : entries) {
    if (std::find(kClusterFields.begin(), kClusterFields.end(), e.name) == kClusterFields.end())
      invalid(fmt::format("a cluster has no entry '{}' (its entries: {})", e.name,
                          joined(kClusterFields)),
              e.span);
    validateClusterEntry(e);
    fields.emplace_back(e.name, e.value);
  }
  auto has = [&](const std::string& name) {
    return std::any_of(fields.begin(), fields.end(), [&](const auto& f) { return f.first == name; });
  };
  // A single node needs no inter-node link; it then inherits the intra-node one.
  const Entry* nodes = findEntry(entries, "nodes");
  bool singleNode = nodes && nodes->value.asInt() == 1;
  for (const auto& name : kClusterFields) {
    if (has(name)) continue;
    if (name == "inter_node" && singleNode && has("intra_node")) {
      auto intra = std::find_if(fields.begin(), fields.end(),
                                [](const auto& f) { return f.first == "intra_node"; });
      fields.emplace_back("inter_node", intra->second);
      continue;
    }
    invalid(fmt::format("cluster '{}' does not set '{}'", decl.name, name), decl.nameSpan);
  }
  Fields canonical;
  for (const auto& name : kClusterFields)
    for (const auto& f : fields)
      if (f.first == name) canonical.push_back(f);
  auto object = std::make_shared<ClusterObject>(decl.name, std::move(canonical));
  evaluator.heap().adopt(object, kObjectOverhead);
  return Value::object(ValueKind::Object, std::move(object));
}

// ---- schedules ----

namespace {

using HintCheck = std::function<void(const Entry&)>;

const std::map<std::string, HintCheck>& scheduleHints() {
  static const std::map<std::string, HintCheck> hints = {
      {"microbatches", [](const Entry& e) { requirePositiveInt(e, true); }},
      {"stages", [](const Entry& e) { requirePositiveInt(e, true); }},
      {"virtual_stages", [](const Entry& e) { requirePositiveInt(e, true); }},
      {"max_tensor_parallel", [](const Entry& e) { requirePositiveInt(e, true); }},
      {"data_parallel", [](const Entry& e) { requirePositiveInt(e, true); }},
      {"pipeline",
       [](const Entry& e) { requireChoice(e, {"gpipe", "1f1b", "interleaved", "zb-h1", "zbv"}); }},
      {"recompute", [](const Entry& e) { requireChoice(e, {"none", "selective", "full"}); }},
      {"shard_optimizer", [](const Entry& e) { requireBool(e); }},
      {"optimizer",
       [](const Entry& e) {
         if (!isKind(e.value, {"adam", "adamw", "sgd"}))
           invalid(fmt::format("'optimizer' must be adam(...), adamw(...) or sgd(...), not {}",
                               e.value.repr()),
                   e.span);
       }},
  };
  return hints;
}

const std::vector<std::string> kScheduleBounds = {"memory_per_device"};

std::vector<std::string> hintNames() {
  std::vector<std::string> names;
  for (const auto& [name, check] : scheduleHints()) names.push_back(name);
  return names;
}

// "; did you mean 'pipeline'?" for a hint a letter or two away from one.
std::string nearestHint(const std::string& name) {
  std::vector<std::string> names = hintNames();
  names.insert(names.end(), kScheduleBounds.begin(), kScheduleBounds.end());
  std::string best = ir::nearestName(name, names);
  return best.empty() ? "" : fmt::format("; did you mean '{}'?", best);
}

// Hints that only make sense together.
void crossCheck(const std::vector<Entry>& hints) {
  const Entry* pipeline = findEntry(hints, "pipeline");
  const Entry* virtualStages = findEntry(hints, "virtual_stages");
  if (!virtualStages || !virtualStages->value.isInt()) return;
  std::string kind = pipeline && pipeline->value.isString() ? pipeline->value.asString() : "";
  std::int64_t v = virtualStages->value.asInt();
  if (kind == "zbv" && v != 2)
    invalid("pipeline \"zbv\" runs exactly 2 virtual stages per device", virtualStages->span);
  if (v > 1 && kind != "interleaved" && kind != "zbv")
    invalid(fmt::format("virtual_stages = {} needs pipeline = \"interleaved\" (or \"zbv\")", v),
            virtualStages->span);
}

Value boundOf(Evaluator& evaluator, const ast::BinaryExpr& compare,
              const std::shared_ptr<Environment>& env, std::vector<ScheduleBound>& bounds) {
  const auto& name = static_cast<const ast::NameRef&>(*compare.lhs).name;
  if (std::find(kScheduleBounds.begin(), kScheduleBounds.end(), name) == kScheduleBounds.end())
    invalid(fmt::format("'{}' cannot be bounded; a schedule bounds {}", name, joined(kScheduleBounds)),
            compare.lhs->span);
  Value limit = evaluator.eval(*compare.rhs, env);
  if (limit.kind() != ValueKind::Quantity || limit.dimension() != Dimension{1, 0, 0})
    failAt(DiagnosticKind::UnitMismatch,
           fmt::format("'{}' is bounded by bytes (such as 70GB), not {}", name, limit.repr()),
           compare.rhs->span);
  // Refused where it is written, as `microbatches = 0` is, rather than later
  // as a plan that cannot fit.
  if (!(limit.quantityValue() > 0))
    invalid(fmt::format("'{}' must be bounded by a positive amount of bytes, not {}", name,
                        limit.repr()),
            compare.rhs->span);
  for (const auto& b : bounds)
    if (b.name == name)
      failAt(DiagnosticKind::Redefinition, fmt::format("'{}' is bounded twice", name), compare.span);
  bounds.push_back({name, limit});
  return limit;
}

bool isBound(const ast::Stmt& statement) {
  if (statement.kind != ast::StmtKind::Expr) return false;
  const auto& expr = *static_cast<const ast::ExprStmt&>(statement).expr;
  if (expr.kind != ast::ExprKind::Binary) return false;
  const auto& binary = static_cast<const ast::BinaryExpr&>(expr);
  return (binary.op == ast::BinaryOp::Le || binary.op == ast::BinaryOp::Lt) &&
         binary.lhs->kind == ast::ExprKind::Name;
}

void checkHint(const Entry& e) {
  if (e.name == "memory_per_device")
    invalid("bound the memory with `memory_per_device <= ...`", e.span);
  auto check = scheduleHints().find(e.name);
  if (check == scheduleHints().end())
    invalid(fmt::format("unknown schedule hint '{}'{} (hints: {})", e.name, nearestHint(e.name),
                        joined(hintNames())),
            e.span);
  check->second(e);
}

}  // namespace

bool isScheduleHint(const std::string& name) {
  return scheduleHints().count(name) > 0 ||
         std::find(kScheduleBounds.begin(), kScheduleBounds.end(), name) != kScheduleBounds.end();
}

Value evalSchedule(Evaluator& evaluator, const ast::ScheduleDecl& decl,
                   const std::shared_ptr<Environment>& env) {
  auto scope = std::make_shared<Environment>(env);
  std::vector<ScheduleBound> bounds;
  std::vector<Entry> hints;
  std::vector<Value> pins, exclusions;
  ScheduleSpans spans;
  for (const auto& statement : decl.body.statements) {
    if (isBound(*statement)) {
      const auto& expr = *static_cast<const ast::ExprStmt&>(*statement).expr;
      boundOf(evaluator, static_cast<const ast::BinaryExpr&>(expr), scope, bounds);
      spans.entries.emplace_back(bounds.back().name, statement->span);
      continue;
    }
    std::vector<Value> values;
    if (auto entry = runBodyStatement(evaluator, *statement, scope, "schedule", hints, &values)) {
      checkHint(*entry);
      spans.entries.emplace_back(entry->name, entry->span);
      hints.push_back(std::move(*entry));
    }
    for (auto& value : values) {
      if (!isKind(value, {"pin", "exclude"}))
        invalid("a schedule holds hints (`name = value`), bounds (`name <= value`), pin(...) "
                "and exclude(...)",
                statement->span);
      bool pin = isKind(value, {"pin"});
      (pin ? pins : exclusions).push_back(value);
      (pin ? spans.pins : spans.exclusions).push_back(statement->span);
    }
  }
  crossCheck(hints);
  Fields fields;
  for (auto& e : hints) fields.emplace_back(e.name, e.value);
  auto object = std::make_shared<ScheduleObject>(decl.name, std::move(fields), std::move(bounds),
                                                 std::move(pins), std::move(spans),
                                                 std::move(exclusions));
  evaluator.heap().adopt(object, kObjectOverhead);
  return Value::object(ValueKind::Object, std::move(object));
}

// ---- printing ----

std::string ModelObject::repr(int depth) const {
  std::string out = "model " + (declaration_ ? declaration_->name() : std::string("?")) + "(";
  for (std::size_t i = 0; i < args_.size(); ++i)
    out += (i ? ", " : "") + args_[i].first + " = " + args_[i].second.repr(depth + 1);
  return out + ")";
}

std::optional<Value> ModelObject::field(const std::string& name) const {
  if (name == "name" && declaration_) return Value::string(declaration_->name());
  for (const auto& [key, value] : args_)
    if (key == name) return value;
  return std::nullopt;
}

std::vector<std::string> ModelObject::fieldNames() const {
  std::vector<std::string> names = {"name"};
  for (const auto& arg : args_) names.push_back(arg.first);
  return names;
}

std::string ClusterObject::repr(int depth) const {
  std::string out = "cluster " + name_ + " {";
  for (std::size_t i = 0; i < fields_.size(); ++i)
    out += (i ? ", " : " ") + fields_[i].first + " = " + fields_[i].second.repr(depth + 1);
  return out + " }";
}

std::optional<Value> ClusterObject::field(const std::string& name) const {
  if (name == "name") return Value::string(name_);
  for (const auto& [key, value] : fields_)
    if (key == name) return value;
  return std::nullopt;
}

std::vector<std::string> ClusterObject::fieldNames() const {
  std::vector<std::string> names = {"name"};
  for (const auto& f : fields_) names.push_back(f.first);
  return names;
}

std::string ScheduleObject::repr(int depth) const {
  std::string out = "schedule " + name_ + " {";
  std::string sep = " ";
  for (const auto& [key, value] : hints_) {
    out += sep + key + " = " + value.repr(depth + 1);
    sep = ", ";
  }
  for (const auto& bound : bounds_) {
    out += sep + bound.name + " <= " + bound.limit.repr(depth + 1);
    sep = ", ";
  }
  for (const auto* calls : {&pins_, &exclusions_})
    for (const auto& call : *calls) {
      std::string args, kind;
      for (const auto& [key, value] : static_cast<const RecordObject&>(*call.object()).fields)
        if (key == "kind")
          kind = value.str();
        else
          args += (args.empty() ? "" : ", ") + key + " = " + value.repr(depth + 1);
      out += sep + kind + "(" + args + ")";
      sep = ", ";
    }
  return out + " }";
}

std::optional<Value> ScheduleObject::field(const std::string& name) const {
  if (name == "name") return Value::string(name_);
  if (name == "pins") return Value::list(pins_);
  if (name == "exclusions") return Value::list(exclusions_);
  for (const auto& [key, value] : hints_)
    if (key == name) return value;
  for (const auto& bound : bounds_)
    if (bound.name == name) return bound.limit;
  return std::nullopt;
}

SourceSpan ScheduleObject::spanOf(const std::string& name) const {
  for (const auto& [entry, span] : spans_.entries)
    if (entry == name) return span;
  return {};
}

SourceSpan ScheduleObject::pinSpan(std::size_t index) const {
  return index < spans_.pins.size() ? spans_.pins[index] : SourceSpan{};
}

SourceSpan ScheduleObject::exclusionSpan(std::size_t index) const {
  return index < spans_.exclusions.size() ? spans_.exclusions[index] : SourceSpan{};
}

std::vector<std::string> ScheduleObject::fieldNames() const {
  std::vector<std::string> names = {"name", "pins", "exclusions"};
  for (const auto& h : hints_) names.push_back(h.first);
  for (const auto& b : bounds_) names.push_back(b.name);
  return names;
}

}  // namespace meshflow::interp
