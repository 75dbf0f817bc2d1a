// flambeau::io::load: a safetensors file (recognised by content), a sharded checkpoint's
// index (*.safetensors.index.json: {"weight_map": {name: shard}}), or a directory
// holding one. Shards are opened with SafeOpen, so only their headers are read.
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "flambeau/io/safetensors.h"
#include "flambeau/io/safetensors_internal.h"

namespace flambeau::io {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

// Thrown from the JSON parser's callback of parse_json, and caught there.
struct DuplicateKey {
  std::string key;
};
struct TooDeep {};

// JSON text as a tree, rejecting duplicate keys in any object and nesting deeper than
// max_depth (objects and arrays); errors name `path`.
Json parse_json(std::string_view text, const std::string& path, int max_depth) {
  // Keys seen in each open object, to reject duplicates (the JSON library keeps the last).
  std::vector<std::unordered_set<std::string>> open;
  int depth = 0;
  auto cb = [&](int, Json::parse_event_t ev, Json& parsed) {
    switch (ev) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start:
        if (++depth > max_depth) throw TooDeep{};
        if (ev == Json::parse_event_t::object_start) open.emplace_back();
        break;
      case Json::parse_event_t::object_end:
        open.pop_back();
        --depth;
        break;
      case Json::parse_event_t::array_end:
        --depth;
        break;
      case Json::parse_event_t::key:
        if (!open.back().insert(parsed.get<std::string>()).second) throw DuplicateKey{parsed.get<std::string>()};
        break;
      default:
        break;
    }
    return true;
  };
  try {
    return Json::parse(text.begin(), text.end(), cb);
  } catch (const DuplicateKey& d) {
    fail(path, "duplicate key '", d.key, "'");
  } catch (const TooDeep&) {
    fail(path, "JSON nests deeper than the format allows");
  } catch (const nlohmann::json::exception& e) {
    fail(path, "not valid JSON (", e.what(), ")");
  }
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

TensorList load_file(const std::string& path, Metadata* metadata_out, const LoadOptions& o) {
  SafeOpen f(path);
  TensorList out;
  for (const auto& t : f.header().tensors) out.emplace_back(t.name, f.get_tensor(t.name, o.copy));
  if (metadata_out) *metadata_out = f.metadata();
  return out;
}

TensorList load_index(const std::string& path, Metadata* metadata_out, const LoadOptions& o) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec) fail(path, "cannot read the index (", ec.message(), ")");
  if (size > kMaxHeaderSize) fail(path, "index is larger than ", kMaxHeaderSize, " bytes");
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) fail(path, "cannot read the index");
  const Json root = parse_json(text.str(), path, 64);
  if (!root.is_object() || !root.contains("weight_map") || !root["weight_map"].is_object())
    fail(path, "index must be a JSON object with a \"weight_map\" object");
  const fs::path dir = fs::path(path).parent_path();
  std::map<std::string, SafeOpen> shards;
  TensorList out;
  for (const auto& [name, file] : root["weight_map"].items()) {
    if (!file.is_string()) fail(path, "weight_map entry '", name, "' must be a file name, got ", file.dump());
    const fs::path rel(file.get<std::string>());
    // Shards live next to the index: no absolute paths, no "..".
    bool escapes = rel.empty() || rel.is_absolute();
    for (const auto& part : rel) escapes = escapes || part == "..";
    if (escapes) fail(path, "shard '", rel.string(), "' of '", name, "' is not a path inside the index's directory");
    auto it = shards.find(rel.string());
    if (it == shards.end()) it = shards.emplace(rel.string(), SafeOpen((dir / rel).string())).first;
    if (!it->second.contains(name)) fail(path, "tensor '", name, "' is not in its shard '", rel.string(), "'");
    out.emplace_back(name, it->second.get_tensor(name, o.copy));
  }
  if (metadata_out) {
    metadata_out->clear();
    if (root.contains("metadata") && root["metadata"].is_object())
      for (const auto& [k, v] : root["metadata"].items())
        metadata_out->emplace_back(k, v.is_string() ? v.get<std::string>() : v.dump());
  }
  return out;
}

// The one file in `dir` whose name ends with `suffix` ("" if none); error if several.
std::string only_file(const std::string& dir, std::string_view suffix) {
  std::string found;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (!e.is_regular_file() || !ends_with(name, suffix)) continue;
    if (!found.empty()) fail(dir, "holds several *", suffix, " files; pass one of them");
    found = e.path().string();
  }
  return found;
}

}  // namespace

TensorList load(const std::string& path, Metadata* metadata_out, const LoadOptions& options) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    std::string p = only_file(path, ".safetensors.index.json");
    if (!p.empty()) return load_index(p, metadata_out, options);
    p = only_file(path, ".safetensors");
    if (!p.empty()) return load_file(p, metadata_out, options);
    fail(path, "directory holds no *.safetensors.index.json or *.safetensors file");
  }
  if (is_safetensors(path)) return load_file(path, metadata_out, options);
  if (!fs::exists(path, ec)) fail(path, "no such file");
  char head[2] = {0, 0};
  std::ifstream(path, std::ios::binary).read(head, 2);
  if (ends_with(path, ".json") || head[0] == '{') return load_index(path, metadata_out, options);
  if (head[0] == '\x80' || (head[0] == 'P' && head[1] == 'K'))
    throw ValueError("[load] " + path + ": not a safetensors file (a pickle or zip, as torch.save writes?); "
                     "flambeau reads the safetensors format only");
  // Anything else is read as safetensors, to say what is wrong with it.
  return load_file(path, metadata_out, options);
}

TensorList load(const std::string& path, const LoadOptions& options) { return load(path, nullptr, options); }

}  // namespace flambeau::io
