#include "interp/Environment.h"

#include <algorithm>
#include <set>

#include "interp/Object.h"

namespace meshflow::interp {

Environment::~Environment() { clear(); }

Binding* Environment::find(const std::string& name) {
  for (Environment* env = this; env; env = env->parent_.get())
    if (Binding* b = env->findLocal(name)) return b;
  return nullptr;
}

Binding* Environment::findLocal(const std::string& name) {
  auto it = bindings_.find(name);
  return it == bindings_.end() ? nullptr : &it->second;
}

bool Environment::define(const std::string& name, Binding binding) {
  return bindings_.try_emplace(name, std::move(binding)).second;
}

std::vector<std::string> Environment::visibleNames() const {
  std::set<std::string> names;
  for (const Environment* env = this; env; env = env->parent_.get())
    for (const auto& entry : env->bindings_) names.insert(entry.first);
  return {names.begin(), names.end()};
}

std::vector<std::string> Environment::localNames() const {
  std::vector<std::string> names;
  for (const auto& entry : bindings_) names.push_back(entry.first);
  std::sort(names.begin(), names.end());
  return names;
}

void Environment::clear() {
  std::vector<Value> values;
  values.reserve(bindings_.size());
  for (auto& entry : bindings_) values.push_back(std::move(entry.second.value));
  bindings_.clear();
  releaseWithoutRecursion(values);
}

}  // namespace meshflow::interp
