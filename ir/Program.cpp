#include "ir/Program.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdlib>
#include <map>
#include <optional>

namespace meshflow::ir {
namespace {

constexpr std::array<std::pair<Opcode, std::string_view>, 10> kOpcodeNames = {{
    {Opcode::kRun, "RUN"},
    {Opcode::kSend, "SEND"},
    {Opcode::kRecv, "RECV"},
    {Opcode::kAllReduce, "ALL_REDUCE"},
    {Opcode::kAllGather, "ALL_GATHER"},
    {Opcode::kReduceScatter, "REDUCE_SCATTER"},
    {Opcode::kAllToAll, "ALL_TO_ALL"},
    {Opcode::kBroadcast, "BROADCAST"},
    {Opcode::kFree, "FREE"},
    {Opcode::kUpdate, "UPDATE"},
}};

constexpr std::array<std::pair<BufferRole, std::string_view>, 8> kRoleNames = {{
    {BufferRole::kActivationIn, "act-in"},
    {BufferRole::kStash, "stash"},
    {BufferRole::kActivationOut, "act-out"},
    {BufferRole::kGradIn, "grad-in"},
    {BufferRole::kGradOut, "grad-out"},
    {BufferRole::kTile, "tile"},
    {BufferRole::kGradient, "gradient"},
    {BufferRole::kParameters, "parameters"},
}};

constexpr std::array<std::pair<Stream, std::string_view>, 3> kStreamNames = {{
    {Stream::kCompute, "compute"},
    {Stream::kComm, "comm"},
    {Stream::kGrad, "grad"},
}};

template <typename Enum, size_t N>
std::optional<Enum> lookup(const std::array<std::pair<Enum, std::string_view>, N>& table,
                           std::string_view name) {
  for (const auto& [value, text] : table) {
    if (text == name) return value;
  }
  return std::nullopt;
}

template <typename Enum, size_t N>
std::string_view nameOf(const std::array<std::pair<Enum, std::string_view>, N>& table,
                        Enum value) {
  for (const auto& [entry, text] : table) {
    if (entry == value) return text;
  }
  return "?";
}

Stream defaultStream(Opcode op) {
  if (op == Opcode::kRun || op == Opcode::kUpdate || op == Opcode::kFree) return Stream::kCompute;
  return Stream::kComm;
}

std::string idList(std::span<const BufferId> ids) {
  std::string text;
  for (BufferId id : ids) text += fmt::format("{}{}", text.empty() ? "" : ",", id);
  return text;
}

void appendOperands(std::string& line, std::span<const BufferId> uses,
                    std::span<const BufferId> defs) {
  if (!uses.empty()) line += " use=" + idList(uses);
  if (!defs.empty()) line += " def=" + idList(defs);
}

bool inPlace(std::span<const BufferId> uses, std::span<const BufferId> defs) {
  return uses.size() == 1 && defs.size() == 1 && uses[0] == defs[0];
}

std::string runText(const DeviceCode& code, const Instruction& in) {
  std::string line = fmt::format("RUN {} stage={} chunk={} mb={}", actionKindLetter(in.action),
                                 in.stage, in.chunk, in.microbatch);
  if (in.parts > 1) line += fmt::format(" part={}/{}", in.part, in.parts);
  line += fmt::format(" cost={}", in.cost);
  appendOperands(line, code.uses(in), code.defs(in));
  return line;
}

std::string collectiveText(const DeviceCode& code, const Instruction& in) {
  std::string line = fmt::format("{} group={}", opcodeName(in.op), in.peer);
  if (inPlace(code.uses(in), code.defs(in))) {
    line += fmt::format(" buf={}", code.uses(in)[0]);
  } else {
    appendOperands(line, code.uses(in), code.defs(in));
  }
  line += fmt::format(" bytes={}", in.bytes);
  if (in.stream != Stream::kComm) line += fmt::format(" stream={}", streamName(in.stream));
  return line;
}

std::string onlyOperand(std::span<const BufferId> ids) {
  return ids.size() == 1 ? fmt::format("{}", ids[0]) : "?";
}

// --- parsing -------------------------------------------------------------------

class LineParser {
 public:
  LineParser(std::string_view text, int lineNumber) : lineNumber_(lineNumber) {
    size_t pos = 0;
    while (pos < text.size()) {
      while (pos < text.size() && text[pos] == ' ') ++pos;
      size_t end = text.find(' ', pos);
      if (end == std::string_view::npos) end = text.size();
      if (end > pos) words_.push_back(text.substr(pos, end - pos));
      pos = end;
    }
  }

  const std::vector<std::string_view>& words() const { return words_; }

  [[noreturn]] void fail(std::string_view what) const {
    throw ProgramError(fmt::format("program text line {}: {}", lineNumber_, what));
  }

  /// The value of `key=` among the words from `first` on, if present.
  std::optional<std::string_view> find(std::string_view key, size_t first) const {
    for (size_t i = first; i < words_.size(); ++i) {
      std::string_view word = words_[i];
      if (word.size() > key.size() && word.substr(0, key.size()) == key &&
          word[key.size()] == '=') {
        return word.substr(key.size() + 1);
      }
    }
    return std::nullopt;
  }

  std::string_view require(std::string_view key, size_t first) const {
    std::optional<std::string_view> value = find(key, first);
    if (!value) fail(fmt::format("missing {}=", key));
    return *value;
  }

  int64_t integer(std::string_view text) const {
    int64_t value = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || ptr != text.data() + text.size()) {
      fail(fmt::format("expected an integer, got '{}'", text));
    }
    return value;
  }

  int64_t integerOf(std::string_view key, size_t first) const {
    return integer(require(key, first));
  }

  double real(std::string_view text) const {
    std::string copy(text);
    char* end = nullptr;
    double value = std::strtod(copy.c_str(), &end);
    if (copy.empty() || end != copy.c_str() + copy.size()) {
      fail(fmt::format("expected a number, got '{}'", text));
    }
    return value;
  }

  std::vector<BufferId> ids(std::string_view key, size_t first) const {
    std::vector<BufferId> result;
    std::optional<std::string_view> list = find(key, first);
    if (!list) return result;
    size_t pos = 0;
    while (pos <= list->size()) {
      size_t end = list->find(',', pos);
      if (end == std::string_view::npos) end = list->size();
      result.push_back(static_cast<BufferId>(integer(list->substr(pos, end - pos))));
      pos = end + 1;
    }
    return result;
  }

 private:
  int lineNumber_;
  std::vector<std::string_view> words_;
};

struct ParsedInstruction {
  Instruction in;
  std::vector<BufferId> uses;
  std::vector<BufferId> defs;
};

ActionKind parseActionLetter(const LineParser& line, std::string_view letter) {
  if (letter == "F") return ActionKind::kForward;
  if (letter == "B") return ActionKind::kBackward;
  if (letter == "I") return ActionKind::kInputGrad;
  if (letter == "W") return ActionKind::kWeightGrad;
  if (letter == "R") return ActionKind::kRecompute;
  line.fail(fmt::format("expected F, B, I, W or R after RUN, got '{}'", letter));
}

void parsePart(const LineParser& line, Instruction& in) {
  std::optional<std::string_view> part = line.find("part", 2);
  if (!part) return;
  size_t slash = part->find('/');
  if (slash == std::string_view::npos) line.fail("part must read k/K");
  in.part = static_cast<uint16_t>(line.integer(part->substr(0, slash)));
  in.parts = static_cast<uint16_t>(line.integer(part->substr(slash + 1)));
}

ParsedInstruction parseRun(const LineParser& line) {
  ParsedInstruction parsed;
  Instruction& in = parsed.in;
  if (line.words().size() < 2) line.fail("RUN needs an action letter");
  in.action = parseActionLetter(line, line.words()[1]);
  in.stage = static_cast<int32_t>(line.integerOf("stage", 2));
  in.chunk = static_cast<uint8_t>(line.integerOf("chunk", 2));
  in.microbatch = static_cast<int32_t>(line.integerOf("mb", 2));
  parsePart(line, in);
  in.cost = line.real(line.require("cost", 2));
  parsed.uses = line.ids("use", 2);
  parsed.defs = line.ids("def", 2);
  return parsed;
}

ParsedInstruction parseInstruction(const LineParser& line) {
  std::optional<Opcode> op = lookup(kOpcodeNames, line.words()[0]);
  if (!op) line.fail(fmt::format("unknown instruction '{}'", line.words()[0]));
  ParsedInstruction parsed;
  if (*op == Opcode::kRun) {
    parsed = parseRun(line);
  } else if (*op == Opcode::kUpdate) {
    parsed.in.stage = static_cast<int32_t>(line.integerOf("stage", 1));
    parsed.in.cost = line.real(line.require("cost", 1));
    parsed.uses = line.ids("use", 1);
    parsed.defs = line.ids("def", 1);
  } else if (*op == Opcode::kSend) {
    parsed.in.peer = static_cast<int32_t>(line.integerOf("to", 1));
    parsed.uses = line.ids("buf", 1);
    parsed.in.target = static_cast<BufferId>(line.integerOf("target", 1));
    parsed.in.bytes = line.integerOf("bytes", 1);
  } else if (*op == Opcode::kRecv) {
    parsed.in.peer = static_cast<int32_t>(line.integerOf("from", 1));
    parsed.defs = line.ids("buf", 1);
    parsed.in.bytes = line.integerOf("bytes", 1);
  } else if (*op == Opcode::kFree) {
    parsed.uses = line.ids("buf", 1);
  } else {
    parsed.in.peer = static_cast<int32_t>(line.integerOf("group", 1));
    parsed.in.bytes = line.integerOf("bytes", 1);
    if (line.find("buf", 1)) {
      parsed.uses = line.ids("buf", 1);
      parsed.defs = parsed.uses;
    } else {
      parsed.uses = line.ids("use", 1);
      parsed.defs = line.ids("def", 1);
    }
  }
  parsed.in.op = *op;
  parsed.in.stream = defaultStream(*op);
  if (std::optional<std::string_view> stream = line.find("stream", 1)) {
    std::optional<Stream> named = lookup(kStreamNames, *stream);
    if (!named) line.fail(fmt::format("unknown stream '{}'", *stream));
    parsed.in.stream = *named;
  }
  return parsed;
}

void parseBuffer(const LineParser& line, Program& program) {
  const auto& words = line.words();
  if (words.size() < 2) line.fail("buffer needs an id");
  if (line.integer(words[1]) != static_cast<int64_t>(program.buffers.size())) {
    line.fail(fmt::format("buffers must be numbered in order; expected {}",
                          program.buffers.size()));
  }
  std::optional<BufferRole> role = lookup(kRoleNames, line.require("role", 2));
  if (!role) line.fail("unknown buffer role");
  program.addBuffer(static_cast<int>(line.integerOf("device", 2)), line.integerOf("bytes", 2),
                    *role);
}

void parseGroup(const LineParser& line, Program& program) {
  const auto& words = line.words();
  if (words.size() < 2 || words[1].empty() || words[1].back() != ':') {
    line.fail("a group reads 'group N: d0 d1 ...'");
  }
  if (line.integer(words[1].substr(0, words[1].size() - 1)) !=
      static_cast<int64_t>(program.groups.size())) {
    line.fail(fmt::format("groups must be numbered in order; expected {}", program.groups.size()));
  }
  std::vector<int> members;
  for (size_t i = 2; i < words.size(); ++i) members.push_back(static_cast<int>(line.integer(words[i])));
  program.addGroup(std::move(members));
}

// --- checking ------------------------------------------------------------------

[[noreturn]] void broken(const Program& program, int device, size_t index, std::string_view why) {
  const Instruction& in = program.devices[static_cast<size_t>(device)].code[index];
  throw ProgramError(fmt::format("device {} instruction {} `{}`: {}", device, index,
                                 instructionText(program, device, in), why));
}

enum class Liveness : uint8_t { kUnborn, kLive, kFreed };

struct BufferState {
  Liveness liveness = Liveness::kUnborn;
  bool usedSinceDef = false;
};

void checkOperand(const Program& program, int device, size_t index, BufferId id) {
  if (id >= program.buffers.size()) broken(program, device, index, fmt::format("no buffer {}", id));
  if (program.buffers[id].device != device) {
    broken(program, device, index,
           fmt::format("buffer {} lives on device {}", id, program.buffers[id].device));
  }
}

void checkUse(const Program& program, int device, size_t index, BufferId id,
              std::vector<BufferState>& states) {
  checkOperand(program, device, index, id);
  BufferState& state = states[id];
  if (state.liveness == Liveness::kFreed) {
    broken(program, device, index, fmt::format("uses buffer {} after its FREE", id));
  }
  if (state.liveness == Liveness::kUnborn && !program.buffers[id].resident()) {
    broken(program, device, index, fmt::format("uses buffer {} before it is defined", id));
  }
  state.usedSinceDef = true;
}

void checkDef(const Program& program, int device, size_t index, BufferId id, bool inPlaceDef,
              std::vector<BufferState>& states) {
  checkOperand(program, device, index, id);
  BufferState& state = states[id];
  if (state.liveness == Liveness::kFreed) {
    broken(program, device, index, fmt::format("defines buffer {} after its FREE", id));
  }
  if (state.liveness == Liveness::kLive && !inPlaceDef) {
    broken(program, device, index,
           fmt::format("redefines buffer {}; only an in-place instruction may", id));
  }
  state.liveness = Liveness::kLive;
  state.usedSinceDef = false;
}

void checkFree(const Program& program, int device, size_t index, const DeviceCode& code,
               const Instruction& in, std::vector<BufferState>& states) {
  if (in.useCount != 1 || in.defCount != 0) broken(program, device, index, "FREE names one buffer");
  BufferId id = code.uses(in)[0];
  checkOperand(program, device, index, id);
  if (program.buffers[id].resident()) {
    broken(program, device, index, fmt::format("frees resident buffer {}", id));
  }
  if (states[id].liveness != Liveness::kLive) {
    broken(program, device, index, fmt::format("frees buffer {}, which is not live", id));
  }
  states[id].liveness = Liveness::kFreed;
}

// An in-place redefinition (uses and defines the same buffer) must be the first use
// after the previous definition, so that every other use sees one definition only.
void checkInstructionOperands(const Program& program, int device, size_t index,
                              std::vector<BufferState>& states) {
  const DeviceCode& code = program.devices[static_cast<size_t>(device)];
  const Instruction& in = code.code[index];
  if (in.op == Opcode::kFree) {
    checkFree(program, device, index, code, in, states);
    return;
  }
  for (BufferId def : code.defs(in)) {
    std::span<const BufferId> uses = code.uses(in);
    const bool redefines = std::find(uses.begin(), uses.end(), def) != uses.end();
    if (def < states.size() && redefines && states[def].liveness == Liveness::kLive &&
        states[def].usedSinceDef) {
      broken(program, device, index,
             fmt::format("redefines buffer {} after other uses of its previous value", def));
    }
  }
  for (BufferId use : code.uses(in)) checkUse(program, device, index, use, states);
  for (BufferId def : code.defs(in)) {
    std::span<const BufferId> uses = code.uses(in);
    checkDef(program, device, index, def, std::find(uses.begin(), uses.end(), def) != uses.end(),
             states);
  }
}

struct MessageEnd {
  int device = -1;
  size_t index = 0;
};

void checkShape(const Program& program, int device, size_t index, const Instruction& in) {
  auto need = [&](bool ok, std::string_view why) {
    if (!ok) broken(program, device, index, why);
  };
  switch (in.op) {
    case Opcode::kSend:
      need(in.useCount == 1 && in.defCount == 0, "SEND uses one buffer");
      need(in.peer >= 0 && in.peer < program.deviceCount() && in.peer != device,
           "SEND needs another device as its peer");
      need(in.target < program.buffers.size() && program.buffers[in.target].device == in.peer,
           "SEND's target buffer must live on its peer");
      break;
    case Opcode::kRecv:
      need(in.useCount == 0 && in.defCount == 1, "RECV defines one buffer");
      need(in.peer >= 0 && in.peer < program.deviceCount() && in.peer != device,
           "RECV needs another device as its peer");
      break;
    case Opcode::kRun:
    case Opcode::kUpdate:
    case Opcode::kFree:
      break;
    default: {
      need(in.peer >= 0 && static_cast<size_t>(in.peer) < program.groups.size(),
           "collective names no existing group");
      const std::vector<int>& group = program.groups[static_cast<size_t>(in.peer)];
      need(std::find(group.begin(), group.end(), device) != group.end(),
           "collective on a group that does not contain the device");
    }
  }
}

}  // namespace

void checkMessages(const Program& program) {
  std::vector<MessageEnd> sends(program.buffers.size());
  for (int d = 0; d < program.deviceCount(); ++d) {
    const DeviceCode& code = program.devices[static_cast<size_t>(d)];
    for (size_t i = 0; i < code.code.size(); ++i) {
      const Instruction& in = code.code[i];
      if (in.op != Opcode::kSend) continue;
      if (sends[in.target].device >= 0) {
        broken(program, d, i, fmt::format("a second SEND fills buffer {}", in.target));
      }
      sends[in.target] = {d, i};
    }
  }
  for (int d = 0; d < program.deviceCount(); ++d) {
    const DeviceCode& code = program.devices[static_cast<size_t>(d)];
    for (size_t i = 0; i < code.code.size(); ++i) {
      const Instruction& in = code.code[i];
      if (in.op != Opcode::kRecv) continue;
      const BufferId target = code.defs(in)[0];
      MessageEnd& send = sends[target];
      if (send.device < 0) {
        broken(program, d, i, fmt::format("no SEND fills buffer {}", target));
      }
      const Instruction& sent = program.devices[static_cast<size_t>(send.device)].code[send.index];
      if (send.device != in.peer || sent.peer != d || sent.bytes != in.bytes) {
        broken(program, d, i,
               fmt::format("does not match device {} instruction {} `{}`", send.device, send.index,
                           instructionText(program, send.device, sent)));
      }
      send.device = -2;  // matched
    }
  }
  for (const MessageEnd& send : sends) {
    if (send.device >= 0) broken(program, send.device, send.index, "no device RECVs this SEND");
  }
}

namespace {

void checkCollectiveSequences(const Program& program) {
  // Per group, per member: the sequence of (opcode, bytes) it calls, and where.
  std::map<std::pair<int, int>, std::vector<std::pair<Opcode, int64_t>>> calls;
  std::map<std::pair<int, int>, std::vector<size_t>> where;
  for (int d = 0; d < program.deviceCount(); ++d) {
    const DeviceCode& code = program.devices[static_cast<size_t>(d)];
    for (size_t i = 0; i < code.code.size(); ++i) {
      const Instruction& in = code.code[i];
      if (!isCollective(in.op)) continue;
      calls[{in.peer, d}].emplace_back(in.op, in.bytes);
      where[{in.peer, d}].push_back(i);
    }
  }
  for (size_t g = 0; g < program.groups.size(); ++g) {
    const std::vector<int>& group = program.groups[g];
    const auto& first = calls[{static_cast<int>(g), group[0]}];
    for (int member : group) {
      const auto& mine = calls[{static_cast<int>(g), member}];
      for (size_t k = 0; k < std::max(first.size(), mine.size()); ++k) {
        if (k < first.size() && k < mine.size() && first[k] == mine[k]) continue;
        const bool own = k < mine.size();
        const int device = own ? member : group[0];
        const size_t index = own ? where[{static_cast<int>(g), member}][k]
                                 : where[{static_cast<int>(g), group[0]}][k];
        broken(program, device, index,
               fmt::format("collective {} on group {} differs between devices {} and {}", k, g,
                           group[0], member));
      }
    }
  }
}

}  // namespace

BufferId Program::addBuffer(int device, int64_t bytes, BufferRole role) {
  buffers.push_back({bytes, device, role});
  return static_cast<BufferId>(buffers.size() - 1);
}

int Program::addGroup(std::vector<int> members) {
  groups.push_back(std::move(members));
  return static_cast<int>(groups.size() - 1);
}

size_t Program::append(int device, Instruction in, std::span<const BufferId> uses,
                       std::span<const BufferId> defs) {
  DeviceCode& code = devices[static_cast<size_t>(device)];
  in.operandBegin = static_cast<uint32_t>(code.operands.size());
  in.useCount = static_cast<uint16_t>(uses.size());
  in.defCount = static_cast<uint16_t>(defs.size());
  code.operands.insert(code.operands.end(), uses.begin(), uses.end());
  code.operands.insert(code.operands.end(), defs.begin(), defs.end());
  code.code.push_back(in);
  return code.code.size() - 1;
}

size_t Program::instructionCount() const {
  size_t count = 0;
  for (const DeviceCode& code : devices) count += code.code.size();
  return count;
}

std::string_view opcodeName(Opcode op) { return nameOf(kOpcodeNames, op); }
std::string_view streamName(Stream stream) { return nameOf(kStreamNames, stream); }
std::string_view bufferRoleName(BufferRole role) { return nameOf(kRoleNames, role); }

bool isCollective(Opcode op) {
  return op == Opcode::kAllReduce || op == Opcode::kAllGather || op == Opcode::kReduceScatter ||
         op == Opcode::kAllToAll || op == Opcode::kBroadcast;
}

std::string instructionText(const Program& program, int device, const Instruction& in) {
  const DeviceCode& code = program.devices[static_cast<size_t>(device)];
  switch (in.op) {
    case Opcode::kRun:
      return runText(code, in);
    case Opcode::kUpdate: {
      std::string line = fmt::format("UPDATE stage={} cost={}", in.stage, in.cost);
      appendOperands(line, code.uses(in), code.defs(in));
      return line;
    }
    case Opcode::kSend:
      return fmt::format("SEND to={} buf={} target={} bytes={}", in.peer, onlyOperand(code.uses(in)),
                         in.target, in.bytes);
    case Opcode::kRecv:
      return fmt::format("RECV from={} buf={} bytes={}", in.peer, onlyOperand(code.defs(in)),
                         in.bytes);
    case Opcode::kFree:
      return fmt::format("FREE buf={}", onlyOperand(code.uses(in)));
    default:
      return collectiveText(code, in);
  }
}

std::string programText(const Program& program) {
  std::string text = fmt::format("program devices={}\n", program.deviceCount());
  for (size_t g = 0; g < program.groups.size(); ++g) {
    text += fmt::format("group {}:", g);
    for (int member : program.groups[g]) text += fmt::format(" {}", member);
    text += '\n';
  }
  for (size_t b = 0; b < program.buffers.size(); ++b) {
    const Buffer& buffer = program.buffers[b];
    text += fmt::format("buffer {} device={} bytes={} role={}\n", b, buffer.device, buffer.bytes,
                        bufferRoleName(buffer.role));
  }
  for (int d = 0; d < program.deviceCount(); ++d) {
    text += fmt::format("device {}:\n", d);
    for (const Instruction& in : program.devices[static_cast<size_t>(d)].code) {
      text += "  " + instructionText(program, d, in) + '\n';
    }
  }
  return text;
}

Program parseProgramText(std::string_view text) {
  Program program;
  int device = -1;
  int lineNumber = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    LineParser line(text.substr(pos, end - pos), ++lineNumber);
    pos = end + 1;
    if (line.words().empty()) continue;
    std::string_view head = line.words()[0];
    if (head == "program") {
      program.devices.resize(static_cast<size_t>(line.integerOf("devices", 1)));
    } else if (head == "group") {
      parseGroup(line, program);
    } else if (head == "buffer") {
      parseBuffer(line, program);
    } else if (head == "device") {
      if (line.words().size() != 2) line.fail("a device header reads 'device N:'");
      std::string_view id = line.words()[1];
      device = static_cast<int>(line.integer(id.substr(0, id.size() - 1)));
      if (device < 0 || device >= program.deviceCount()) line.fail("no such device");
    } else {
      if (device < 0) line.fail("an instruction before any 'device N:' header");
      ParsedInstruction parsed = parseInstruction(line);
      program.append(device, parsed.in, parsed.uses, parsed.defs);
    }
  }
  return program;
}

void checkProgram(const Program& program) {
  std::vector<BufferState> states(program.buffers.size());
  for (int d = 0; d < program.deviceCount(); ++d) {
    const DeviceCode& code = program.devices[static_cast<size_t>(d)];
    for (size_t i = 0; i < code.code.size(); ++i) {
      checkShape(program, d, i, code.code[i]);
      checkInstructionOperands(program, d, i, states);
    }
  }
  checkMessages(program);
  checkCollectiveSequences(program);
}

}  // namespace meshflow::ir
