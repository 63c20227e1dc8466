#include "interp/Object.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "interp/Units.h"

namespace meshflow::interp {

Object::~Object() {
  if (account_) account_->release(charged_);
}

void Object::setAccount(std::shared_ptr<MemoryAccount> account, std::size_t bytes) {
  account->charge(bytes);
  account_ = std::move(account);
  charged_ = bytes;
}

void Object::chargeMore(std::size_t bytes) {
  if (!account_) return;
  account_->charge(bytes);
  charged_ += bytes;
}

void Object::checkTextRoom(std::size_t bytes) const {
  if (account_ && account_->wouldPass(bytes)) account_->checkRoom(bytes, "the text of a " + typeName());
}

void releaseWithoutRecursion(std::vector<Value>& values) {
  // Values whose last owner is a dying container are parked here and destroyed
  // one at a time by the outermost release on this thread, so destruction
  // depth stays constant however deeply values nest.
  thread_local std::vector<Value> parked;
  thread_local bool draining = false;
  for (auto& value : values)
    if (value.object()) parked.push_back(std::move(value));
  values.clear();
  if (draining) return;
  draining = true;
  while (!parked.empty()) {
    Value last = std::move(parked.back());
    parked.pop_back();
  }
  draining = false;
}

RecordObject::~RecordObject() {
  std::vector<Value> values;
  values.reserve(fields.size());
  for (auto& field : fields) values.push_back(std::move(field.second));
  releaseWithoutRecursion(values);
}

std::string StringObject::repr(int) const {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      default: out += c;
    }
  }
  return out + "\"";
}

namespace {

// The containers whose text is being made on this thread, outermost first: a
// container met again inside itself prints as `[...]` / `{...}` (a list that
// holds itself twice would otherwise print 2^kMaxReprDepth copies).
thread_local std::vector<const Object*> printing;

// Marks `object` as being printed for a scope; false when it already is.
class Printing {
 public:
  explicit Printing(const Object* object) : entered_(std::find(printing.begin(), printing.end(), object) == printing.end()) {
    if (entered_) printing.push_back(object);
  }
  ~Printing() {
    if (entered_) printing.pop_back();
  }
  Printing(const Printing&) = delete;
  Printing& operator=(const Printing&) = delete;
  bool entered() const { return entered_; }

 private:
  bool entered_;
};

// The items of one container as their text is made: an item that is the same
// object as one of the last few has the same text (the same depth, the same
// containers around it), so it is copied from `out` rather than made again. A
// list holding one list many times over (`a = [a, a]`, 40 times) has a text
// exponential in its depth: made item by item, reaching the memory limit took
// seconds under the fuzzer's sanitizers (tests/golden/limits/memory_text.mesh).
class ItemTexts {
 public:
  explicit ItemTexts(std::string& out) : out_(out) {}

  void append(const Value& value, int depth) {
    const Object* object = value.object().get();
    if (!object) {
      out_ += value.repr(depth);
      return;
    }
    for (const Made& made : recent_)
      if (made.object == object) {
        out_.append(out_, made.start, made.size);
        return;
      }
    const std::size_t start = out_.size();
    object->appendRepr(out_, depth);
    recent_[next_] = {object, start, out_.size() - start};
    next_ = (next_ + 1) % recent_.size();
  }

 private:
  struct Made {
    const Object* object = nullptr;
    std::size_t start = 0, size = 0;
  };
  std::string& out_;
  std::array<Made, 4> recent_{};
  std::size_t next_ = 0;
};

}  // namespace

std::string ListObject::repr(int depth) const {
  std::string out;
  appendRepr(out, depth);
  return out;
}

void ListObject::appendRepr(std::string& out, int depth) const {
  Printing self(this);
  if (!self.entered() || depth > kMaxReprDepth) {
    out += "[...]";
    return;
  }
  out += '[';
  ItemTexts texts(out);
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i) out += ", ";
    texts.append(items[i], depth + 1);
    checkTextRoom(out.size());
  }
  out += ']';
}

std::string RecordObject::repr(int depth) const {
  std::string out;
  appendRepr(out, depth);
  return out;
}

void RecordObject::appendRepr(std::string& out, int depth) const {
  Printing self(this);
  if (!self.entered() || depth > kMaxReprDepth) {
    out += "{...}";
    return;
  }
  out += '{';
  ItemTexts texts(out);
  for (std::size_t i = 0; i < fields.size(); ++i) {
    if (i) out += ", ";
    out += fields[i].first;
    out += ": ";
    texts.append(fields[i].second, depth + 1);
    checkTextRoom(out.size());
  }
  out += '}';
}

std::optional<Value> RecordObject::field(const std::string& name) const {
  for (const auto& [key, value] : fields)
    if (key == name) return value;
  return std::nullopt;
}

std::vector<std::string> RecordObject::fieldNames() const {
  std::vector<std::string> names;
  for (const auto& field : fields) names.push_back(field.first);
  return names;
}

void RecordObject::set(const std::string& name, Value value) {
  for (auto& [key, existing] : fields)
    if (key == name) {
      existing = std::move(value);
      return;
    }
  chargeMore(stringBytes(name) + sizeof(Value));
  fields.emplace_back(name, std::move(value));
}

std::string RangeObject::repr(int) const {
  if (step == 1) return fmt::format("{}..{}", begin, end);
  return fmt::format("range({}, {}, {})", begin, end, step);
}

std::optional<Value> RangeObject::field(const std::string& name) const {
  if (name == "start") return Value::integer(begin);
  if (name == "stop") return Value::integer(end);
  if (name == "step") return Value::integer(step);
  return std::nullopt;
}

std::int64_t RangeObject::size() const {
  // Computed in unsigned arithmetic: end - begin may not fit in 64 signed bits.
  if (step > 0 && begin < end)
    return static_cast<std::int64_t>((static_cast<std::uint64_t>(end) - static_cast<std::uint64_t>(begin) - 1) /
                                     static_cast<std::uint64_t>(step) + 1);
  if (step < 0 && begin > end)
    return static_cast<std::int64_t>((static_cast<std::uint64_t>(begin) - static_cast<std::uint64_t>(end) - 1) /
                                     (0 - static_cast<std::uint64_t>(step)) + 1);
  return 0;
}

std::size_t stringBytes(const std::string& text) { return kObjectOverhead + text.size(); }
std::size_t listBytes(std::size_t items) { return kObjectOverhead + items * sizeof(Value); }
std::size_t recordBytes(const std::vector<std::pair<std::string, Value>>& fields) {
  std::size_t bytes = kObjectOverhead;
  for (const auto& field : fields) bytes += stringBytes(field.first) + sizeof(Value);
  return bytes;
}

}  // namespace meshflow::interp
