// Imports: finding, loading (once) and caching modules, and import cycles.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "interp/Ast.h"
#include "interp/Environment.h"
#include "interp/Object.h"
#include "meshflow/meshflow.h"

namespace meshflow::interp {

class Evaluator;

/// A loaded module: its scope, whose public names (not starting with `_`) are its exports.
class ModuleObject final : public Object {
 public:
  ModuleObject(std::string key, std::string name, std::shared_ptr<const ast::Program> program,
               std::shared_ptr<Environment> scope)
      : origin_(std::make_shared<ImportOrigin>(ImportOrigin{std::move(key), name})),
        name_(std::move(name)),
        program_(std::move(program)),
        scope_(std::move(scope)) {}
  std::string typeName() const override { return "module"; }
  std::string repr(int) const override { return "<module " + name_ + ">"; }
  std::optional<Value> field(const std::string& name) const override;
  std::vector<std::string> fieldNames() const override;
  void clearReferences() override;
  bool holdsReferences() const override { return true; }
  /// Where the public `name` was first defined: this module, or the module it
  /// imported the name from.
  std::shared_ptr<const ImportOrigin> originOf(const std::string& name) const;

 private:
  std::shared_ptr<const ImportOrigin> origin_;
  std::string name_;
  std::shared_ptr<const ast::Program> program_;
  std::shared_ptr<Environment> scope_;
};

/// Where an import statement leads: the file, and the name the module is known by.
struct ResolvedImport {
  std::filesystem::path path;
  std::string displayName;
};

class ModuleLoader {
 public:
  /// Runs the import statement: loads the module once and binds it (with an
  /// alias) or its exports (without) in `env`.
  void import(Evaluator& evaluator, const ast::ImportStmt& stmt, const SourceFile& importer,
              const std::shared_ptr<Environment>& env);

  /// For `meshflow check`: parses every module reachable from `program`,
  /// reporting missing modules, syntax errors in them, and cycles, without running.
  void checkImports(const Config& config, const ast::Program& program,
                    std::vector<Diagnostic>& diagnostics);

  void clear() { loaded_.clear(); }

 private:
  std::shared_ptr<ModuleObject> load(Evaluator& evaluator, const ast::ImportStmt& stmt,
                                     const SourceFile& importer);
  void checkProgram(const Config& config, const ast::Program& program,
                    std::vector<std::string>& stack, std::vector<Diagnostic>& diagnostics,
                    std::map<std::string, bool>& seen);

  std::map<std::string, std::shared_ptr<ModuleObject>> loaded_;  // by normalised path
  std::vector<std::pair<std::string, SourceSpan>> loading_;      // path, where imported
};

/// The file `stmt` refers to, or a located ImportNotFound / AccessDenied error.
ResolvedImport resolveImport(const Config& config, const ast::ImportStmt& stmt,
                             const SourceFile& importer);

}  // namespace meshflow::interp
