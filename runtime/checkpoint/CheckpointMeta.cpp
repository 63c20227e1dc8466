#include "runtime/checkpoint/CheckpointMeta.h"

#include <fmt/format.h>

#include <limits>
#include <set>

#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/checkpoint/CheckpointFormat.h"
#include "runtime/checkpoint/CheckpointLayout.h"

namespace meshflow::runtime::checkpoint {
namespace {

using nlohmann::json;

constexpr const char* kFormatName = "meshflow-checkpoint";

json tensorTable(const std::map<std::string, TensorEntry>& tensors) {
  json table = json::object();
  for (const auto& [name, entry] : tensors)
    table[name] = {{"dtype", ir::dtypeName(entry.dtype)}, {"shape", entry.shape}};
  return table;
}

json fileList(const std::vector<FileEntry>& files) {
  json list = json::array();
  for (const FileEntry& file : files)
    list.push_back({{"name", file.name}, {"bytes", file.bytes}, {"fnv1a64", file.checksum}});
  return list;
}

// The checksum covers the compact dump, which parsing the indented text and
// dumping it again reproduces exactly (nlohmann's objects are sorted and its
// numbers print so that they read back to the same value).
std::string selfChecksum(const json& withoutChecksum) {
  return checksumText(fnv1a64(withoutChecksum.dump()));
}

json parseJson(std::string_view text, const std::filesystem::path& file) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    // Not only parse_error: a number too large for a double (1e400) is an out_of_range.
    throw CheckpointError(file, fmt::format("not valid JSON ({})", e.what()));
  }
}

void verifyChecksum(json& meta, const std::filesystem::path& file) {
  if (!meta.is_object() || !meta.contains("checksum") || !meta["checksum"].is_string())
    throw CheckpointError(file, "no checksum: not the meta.json of a meshflow checkpoint");
  const std::string stored = meta["checksum"];
  meta.erase("checksum");
  const std::string actual = selfChecksum(meta);
  if (stored != actual)
    throw CheckpointError(file, fmt::format("checksum mismatch: the contents hash to {}, the file "
                                            "says {} (edited or corrupted)",
                                            actual, stored));
}

const json& field(const json& object, const char* key, const std::filesystem::path& file) {
  if (!object.is_object() || !object.contains(key))
    throw CheckpointError(file, fmt::format("missing field \"{}\"", key));
  return object[key];
}

// nlohmann turns a float into an integer type with a cast, undefined behaviour
// when it is out of range (a step of 1.5e19): integers must be written as integers.
std::int64_t integerOf(const json& value, const std::string& what, const std::filesystem::path& file) {
  const bool fits = value.is_number_integer() &&
                    !(value.is_number_unsigned() &&
                      value.get<std::uint64_t>() > std::uint64_t(std::numeric_limits<std::int64_t>::max()));
  if (!fits) throw CheckpointError(file, fmt::format("{} is {}, not a 64-bit integer", what, value.dump()));
  return value.get<std::int64_t>();
}

std::uint64_t sizeOf(const json& value, const std::string& what, const std::filesystem::path& file) {
  if (!value.is_number_unsigned())
    throw CheckpointError(file, fmt::format("{} is {}, not a size", what, value.dump()));
  return value.get<std::uint64_t>();
}

Shape shapeOf(const json& value, const std::filesystem::path& file, const std::string& tensor) {
  if (!value.is_array()) throw CheckpointError(file, "shape " + value.dump() + " is not a list", tensor);
  Shape shape;
  for (const json& d : value) shape.push_back(integerOf(d, "a dimension", file));
  return shape;
}

void verifyFormat(const json& meta, const std::filesystem::path& file) {
  if (field(meta, "format", file) != kFormatName)
    throw CheckpointError(
        file, fmt::format("format is {}, not \"{}\"", meta["format"].dump(), kFormatName));
  const json& version = field(meta, "version", file);
  if (version != kMetaFormatVersion)
    throw CheckpointError(file, fmt::format("format version {}; this meshflow reads version {}",
                                            version.dump(), kMetaFormatVersion));
}

TensorEntry readTensorEntry(const std::string& name, const json& entry,
                            const std::filesystem::path& file) {
  const auto dtype = ir::parseDType(field(entry, "dtype", file).get<std::string>());
  if (!dtype || *dtype == ir::DType::I64)
    throw CheckpointError(file, "dtype " + entry["dtype"].dump() + " is not f32, f16, bf16 or i32", name);
  TensorEntry result{*dtype, shapeOf(field(entry, "shape", file), file, name)};
  for (auto d : result.shape)
    if (d < 0)
      throw CheckpointError(file, "negative dimension in " + shapeText(result.shape), name);
  return result;
}

std::vector<FileEntry> readFileList(const json& list, const std::filesystem::path& file) {
  std::vector<FileEntry> files;
  std::set<std::string> seen;
  for (const json& entry : list) {
    FileEntry f{field(entry, "name", file).get<std::string>(),
                sizeOf(field(entry, "bytes", file), "\"bytes\"", file),
                field(entry, "fnv1a64", file).get<std::string>()};
    if (!isShardFileName(f.name) || !seen.insert(f.name).second)
      throw CheckpointError(
          file, fmt::format("file list names \"{}\", not a shard file or twice", f.name));
    files.push_back(std::move(f));
  }
  return files;
}

CheckpointMeta readFields(const json& meta, const std::filesystem::path& file) {
  CheckpointMeta result;
  result.step = integerOf(field(meta, "step", file), "\"step\"", file);
  result.info = field(meta, "info", file);
  const json& tensors = field(meta, "tensors", file);
  const json& files = field(meta, "files", file);
  if (!tensors.is_object() || !files.is_array())
    throw CheckpointError(file, "\"tensors\" is not an object or \"files\" not an array");
  for (const auto& [name, entry] : tensors.items())
    result.tensors[name] = readTensorEntry(name, entry, file);
  result.files = readFileList(files, file);
  return result;
}

}  // namespace

std::string metaText(const CheckpointMeta& meta) {
  json j = {{"format", kFormatName},
            {"version", kMetaFormatVersion},
            {"step", meta.step},
            {"info", meta.info},
            {"tensors", tensorTable(meta.tensors)},
            {"files", fileList(meta.files)}};
  j["checksum"] = selfChecksum(j);
  return j.dump(2) + "\n";
}

CheckpointMeta parseMeta(std::string_view text, const std::filesystem::path& file) {
  json meta = parseJson(text, file);
  verifyChecksum(meta, file);
  verifyFormat(meta, file);
  // A field of the wrong JSON type (a string for a size, say) surfaces as nlohmann's
  // type_error; it is as much a broken file as a missing field.
  try {
    return readFields(meta, file);
  } catch (const json::type_error& e) {
    throw CheckpointError(file, fmt::format("malformed field ({})", e.what()));
  }
}

}  // namespace meshflow::runtime::checkpoint
