// Reading JSON where every read names its path (`stages[1].submesh: expected
// two integers`) and unknown keys are errors: the plan and plan-file parsers
// (ir/Plan.cpp, ir/PlanFile.cpp). Failures throw ir::PlanError.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ir/Plan.h"

namespace meshflow::ir {


class JsonReader {
 public:
  JsonReader(const nlohmann::json& j, std::string path) : j_(j), path_(std::move(path)) {}

  // An object whose keys must all be in `known`.
  JsonReader object(std::initializer_list<const char*> known) const {
    if (!j_.is_object()) fail("expected an object");
    for (auto it = j_.begin(); it != j_.end(); ++it) {
      bool ok =
          std::any_of(known.begin(), known.end(), [&](const char* k) { return it.key() == k; });
      if (!ok) at(it.key()).fail("unknown key");
    }
    return *this;
  }
  bool has(const char* key) const { return j_.contains(key); }
  JsonReader at(const std::string& key) const {
    if (!j_.contains(key)) JsonReader(j_, join(key)).fail("missing");
    return JsonReader(j_.at(key), join(key));
  }
  JsonReader at(std::size_t i) const { return JsonReader(j_.at(i), fmt::format("{}[{}]", path_, i)); }
  std::size_t size() const {
    if (!j_.is_array()) fail("expected an array");
    return j_.size();
  }

  double number() const {
    if (!j_.is_number()) fail("expected a number");
    return j_.get<double>();
  }
  std::int64_t integer() const {
    if (!j_.is_number_integer()) fail("expected an integer");
    return j_.get<std::int64_t>();
  }
  /// An integer the plan keeps as an int: one outside its range is an error,
  /// not a number cut to 32 bits (`"microbatches": 4294967297` is not 1).
  int int32() const {
    const std::int64_t value = integer();
    if (value < std::numeric_limits<int>::min() || value > std::numeric_limits<int>::max())
      fail(fmt::format("{} does not fit in 32 bits", value));
    return static_cast<int>(value);
  }
  bool boolean() const {
    if (!j_.is_boolean()) fail("expected true or false");
    return j_.get<bool>();
  }
  std::string string() const {
    if (!j_.is_string()) fail("expected a string");
    return j_.get<std::string>();
  }
  std::vector<std::string> strings() const {
    std::vector<std::string> out;
    for (std::size_t i = 0; i < size(); ++i) out.push_back(at(i).string());
    return out;
  }
  std::array<std::int64_t, 2> pair() const {
    if (size() != 2) fail("expected two integers");
    return {at(0).integer(), at(1).integer()};
  }
  [[noreturn]] void fail(const std::string& message) const {
    throw PlanError(fmt::format("{}: {}", path_.empty() ? "plan" : path_, message));
  }

 private:
  std::string join(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  const nlohmann::json& j_;
  std::string path_;
};

/// planFromJson of the plan at `reader`'s path (errors name it: `plan.stages[0]...`).
Plan planFromJson(const JsonReader& reader);

}  // namespace meshflow::ir
