#include "interp/Modules.h"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "grammar/Parser.h"
#include "interp/Evaluator.h"
#include "interp/FileAccess.h"
#include "interp/ParsedModules.h"

namespace meshflow::interp {
namespace {

namespace fs = std::filesystem;

bool isPublic(const std::string& name) { return !name.empty() && name[0] != '_'; }

std::optional<std::string> readFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The normalised path of a source that is a file; none for the REPL's input.
std::optional<std::string> fileKey(const SourceFile& file) {
  if (file.name().empty() || file.name().front() == '<') return std::nullopt;
  return normalisePath(file.name(), fs::current_path()).string();
}

fs::path importerFolder(const SourceFile& importer) {
  fs::path file(importer.name());
  if (importer.name().empty() || importer.name().front() == '<') return fs::current_path();
  return normalisePath(file, fs::current_path()).parent_path();
}

std::vector<fs::path> candidates(const Config& config, const ast::ImportStmt& stmt,
                                 const SourceFile& importer) {
  std::vector<fs::path> paths;
  if (!stmt.isPath) {
    std::string relative = stmt.target;
    for (char& c : relative)
      if (c == '.') c = '/';
    if (relative.rfind("std/", 0) == 0) {
      paths.push_back(fs::path(config.stdlibDir) / (relative.substr(4) + ".mesh"));
      return paths;
    }
    paths.push_back(importerFolder(importer) / (relative + ".mesh"));
    for (const auto& root : config.importRoots) paths.push_back(fs::path(root) / (relative + ".mesh"));
    return paths;
  }
  fs::path target(stmt.target);
  if (target.is_absolute()) return {target};
  paths.push_back(importerFolder(importer) / target);
  for (const auto& root : config.importRoots) paths.push_back(fs::path(root) / target);
  return paths;
}

// Through the shared parses of Config::parsedModules, when the host gave one.
std::shared_ptr<const ast::Program> parseModule(const Config& config, const fs::path& path,
                                                const std::string& text,
                                                const ast::ImportStmt& stmt) {
  if (config.parsedModules)
    if (auto program = config.parsedModules->find(path.string(), text)) return program;
  auto file = std::make_shared<SourceFile>(path.string(), text);
  auto parsed = grammar::parse(file);
  if (parsed.ok()) {
    if (config.parsedModules) config.parsedModules->remember(path.string(), text, parsed.program);
    return parsed.program;
  }
  Diagnostic first = parsed.diagnostics.front();
  first.notes.push_back(
      makeDiagnostic(first.kind, "in the module imported here", stmt.span, Severity::Note));
  throw ScriptError(std::move(first));
}

// Two imports bring different definitions of one name: say which modules.
Diagnostic importClash(const std::string& name, const Binding& existing,
                       const ImportOrigin& incoming, const SourceSpan& span) {
  Diagnostic d = makeDiagnostic(
      DiagnosticKind::Redefinition,
      fmt::format("'{}' from module '{}' clashes with '{}' from module '{}', a different "
                  "definition of the same name",
                  name, incoming.name, name, existing.origin->name),
      span);
  if (existing.definedAt.valid())
    d.notes.push_back(
        makeDiagnostic(DiagnosticKind::Redefinition,
                       fmt::format("'{}' came from '{}' here", name, existing.origin->name),
                       existing.definedAt, Severity::Note));
  return d;
}

}  // namespace

std::optional<Value> ModuleObject::field(const std::string& name) const {
  if (!isPublic(name) || !scope_) return std::nullopt;
  if (Binding* binding = scope_->findLocal(name)) return binding->value;
  return std::nullopt;
}

std::vector<std::string> ModuleObject::fieldNames() const {
  std::vector<std::string> names;
  if (!scope_) return names;
  for (auto& name : scope_->localNames())
    if (isPublic(name)) names.push_back(name);
  return names;
}

std::shared_ptr<const ImportOrigin> ModuleObject::originOf(const std::string& name) const {
  const Binding* binding = scope_ ? scope_->findLocal(name) : nullptr;
  return binding && binding->origin ? binding->origin : origin_;
}

void ModuleObject::clearReferences() {
  if (scope_) scope_->clear();
  scope_.reset();
}

ResolvedImport resolveImport(const Config& config, const ast::ImportStmt& stmt,
                             const SourceFile& importer) {
  std::vector<std::string> looked;
  for (const auto& candidate : candidates(config, stmt, importer)) {
    fs::path normal = normalisePath(candidate, fs::current_path());
    std::error_code error;
    if (fs::is_regular_file(normal, error)) {
      try {
        checkRead(config, normal);
      } catch (ScriptError& denied) {
        throw ScriptError(makeDiagnostic(DiagnosticKind::AccessDenied, denied.diagnostic().message,
                                         stmt.span));
      }
      return {normal, stmt.isPath ? normal.stem().string() : stmt.target};
    }
    looked.push_back(normal.string());
  }
  std::string where;
  for (const auto& path : looked) where += (where.empty() ? "" : ", ") + path;
  throw ScriptError(makeDiagnostic(
      DiagnosticKind::ImportNotFound,
      fmt::format("cannot find module '{}' (looked for {})", stmt.target, where), stmt.span));
}

void ModuleLoader::import(Evaluator& evaluator, const ast::ImportStmt& stmt,
                          const SourceFile& importer, const std::shared_ptr<Environment>& env) {
  auto module = load(evaluator, stmt, importer);
  Value moduleValue = Value::object(ValueKind::Object, module);
  if (stmt.alias) {
    evaluator.define(env, *stmt.alias, moduleValue, false, stmt.span);
    return;
  }
  for (const auto& name : module->fieldNames()) {
    auto origin = module->originOf(name);
    if (const Binding* existing = env->findLocal(name); existing && existing->origin) {
      // `import std.layers` then `import std.models` (which imports std.layers)
      // brings std.layers' `mlp` twice: one definition, nothing to do.
      // The module's instance, not its path: after forgetImports (:reload) a
      // module read again defines its names anew.
      if (existing->origin == origin) continue;
      if (!evaluator.state().config.allowRedefinition || env != evaluator.state().globals)
        throw ScriptError(importClash(name, *existing, *origin, stmt.span));
    }
    evaluator.define(env, name, *module->field(name), false, stmt.span, origin);
  }
}

std::shared_ptr<ModuleObject> ModuleLoader::load(Evaluator& evaluator, const ast::ImportStmt& stmt,
                                                 const SourceFile& importer) {
  const Config& config = evaluator.state().config;
  ResolvedImport resolved = resolveImport(config, stmt, importer);
  std::string key = resolved.path.string();
  // The script that starts a chain of imports is running too: a module that
  // imports it closes a cycle rather than starting a second copy of it.
  struct RootEntry {
    std::vector<std::pair<std::string, SourceSpan>>& loading;
    bool pushed = false;
    ~RootEntry() {
      if (pushed) loading.erase(loading.begin());
    }
  } root{loading_};
  if (auto importerKey = fileKey(importer); importerKey && loading_.empty()) {
    loading_.emplace_back(*importerKey, SourceSpan{});
    root.pushed = true;
  }
  for (std::size_t i = 0; i < loading_.size(); ++i) {
    if (loading_[i].first != key) continue;
    Diagnostic cycle = makeDiagnostic(
        DiagnosticKind::ImportCycle,
        fmt::format("import cycle: '{}' is already being imported", stmt.target), stmt.span);
    for (std::size_t k = i; k < loading_.size(); ++k)
      if (loading_[k].second.valid())
        cycle.notes.push_back(makeDiagnostic(DiagnosticKind::ImportCycle,
                                             fmt::format("'{}' imported here", loading_[k].first),
                                             loading_[k].second, Severity::Note));
    throw ScriptError(std::move(cycle));
  }
  if (auto it = loaded_.find(key); it != loaded_.end()) return it->second;

  auto text = readFile(resolved.path);
  if (!text)
    throw ScriptError(makeDiagnostic(DiagnosticKind::ImportNotFound,
                                     fmt::format("cannot read module '{}'", key), stmt.span));
  auto program = parseModule(config, resolved.path, *text, stmt);
  auto scope = std::make_shared<Environment>(evaluator.state().builtins);
  loading_.emplace_back(key, stmt.span);
  try {
    evaluator.run(program, scope);
  } catch (ScriptError& error) {
    loading_.pop_back();
    // Point from an error inside the module back to the script that imported it.
    if (error.kind() != DiagnosticKind::ImportCycle)
      error.diagnostic().notes.push_back(makeDiagnostic(
          error.kind(), "in the module imported here", stmt.span, Severity::Note));
    throw;
  } catch (...) {
    loading_.pop_back();
    throw;
  }
  loading_.pop_back();
  auto module = std::make_shared<ModuleObject>(key, resolved.displayName, program, scope);
  evaluator.heap().adopt(module, kObjectOverhead);
  loaded_.emplace(key, module);
  return module;
}

void ModuleLoader::checkImports(const Config& config, const ast::Program& program,
                                std::vector<Diagnostic>& diagnostics) {
  std::vector<std::string> stack;
  std::map<std::string, bool> seen;
  // Importing the file being checked is a cycle too.
  if (auto key = fileKey(*program.file)) {
    stack.push_back(*key);
    seen[*key] = true;
  }
  checkProgram(config, program, stack, diagnostics, seen);
}

void ModuleLoader::checkProgram(const Config& config, const ast::Program& program,
                                std::vector<std::string>& stack,
                                std::vector<Diagnostic>& diagnostics,
                                std::map<std::string, bool>& seen) {
  for (const auto& statement : program.statements) {
    if (statement->kind != ast::StmtKind::Import) continue;
    const auto& stmt = static_cast<const ast::ImportStmt&>(*statement);
    try {
      ResolvedImport resolved = resolveImport(config, stmt, *program.file);
      std::string key = resolved.path.string();
      if (std::find(stack.begin(), stack.end(), key) != stack.end())
        throw ScriptError(makeDiagnostic(
            DiagnosticKind::ImportCycle,
            fmt::format("import cycle: '{}' is already being imported", stmt.target), stmt.span));
      if (seen.count(key)) continue;
      seen[key] = true;
      auto text = readFile(resolved.path);
      if (!text) continue;
      auto module = parseModule(config, resolved.path, *text, stmt);
      stack.push_back(key);
      checkProgram(config, *module, stack, diagnostics, seen);
      stack.pop_back();
    } catch (ScriptError& error) {
      diagnostics.push_back(error.diagnostic());
    }
  }
}

}  // namespace meshflow::interp
