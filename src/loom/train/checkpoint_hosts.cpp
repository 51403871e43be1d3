#include "loom/train/checkpoint_hosts.h"

#include <algorithm>
#include <filesystem>

#include "loom/comm/rank_hosts.h"
#include "loom/common/agreed_usage_error.h"
#include "loom/common/error.h"
#include "loom/common/files.h"
#include "loom/common/log.h"
#include "loom/train/host_copies.h"
#include "loom/train/shared_folder.h"

namespace loom::train {
namespace fs = std::filesystem;

namespace {

const char* const kNotShared =
    "the hosts do not share this folder; resume from a folder that every host sees, or copy "
    "the checkpoint whole to each host";

// "2-3 on node-b" where the hosts are known, else "2, 3".
std::string ranks_named(const std::vector<int>& ranks) {
  std::string hosts = comm::hosts_of(ranks);
  if (!hosts.empty()) return hosts;
  std::string out;
  for (int r : ranks) out += detail::concat(out.empty() ? "" : ", ", r);
  return out;
}

}  // namespace

void agree_on_manifest(comm::Backend& world, const std::string& path, Manifest* saved,
                       std::string* dir) {
  std::string why;
  int64_t step = -1;
  try {
    *saved = read_manifest(path, dir);
    step = saved->step;
  } catch (const UsageError& e) {
    why = e.what();
  }
  std::vector<int64_t> steps(static_cast<size_t>(world.size()));
  world.all_gather(&step, steps.data(), 1, comm::DType::Int64)->wait();
  const int64_t newest = *std::max_element(steps.begin(), steps.end());
  if (newest < 0) throw AgreedUsageError(why, 0);  // the same for all: rank 0 says it
  std::vector<int> lacking;
  int source = -1;
  for (int r = 0; r < world.size(); ++r) {
    if (steps[r] != newest) lacking.push_back(r);
    if (steps[r] == newest && source < 0) source = r;
  }
  if (lacking.empty()) return;
  // Hosts whose folders are their own (or hold an older `latest`): the newest checkpoint's
  // manifest and config from the first rank that read it, written on each host that lacks it
  // by its lowest such rank, as a save would have.
  std::string where, manifest, settings;
  if (world.rank() == source) {
    where = fs::path(*dir).lexically_relative(path).string();
    manifest = read_file((fs::path(*dir) / "manifest.json").string());
    std::error_code ec;
    if (fs::exists(fs::path(*dir) / "config.toml", ec))
      settings = read_file((fs::path(*dir) / "config.toml").string());
  }
  for (std::string* text : {&where, &manifest, &settings}) broadcast_text(world, *text, source);
  const std::vector<int> host = host_groups(world.size());
  const int me = world.rank();
  const bool writer =
      steps[me] != newest && std::none_of(lacking.begin(), lacking.end(),
                                          [&](int r) { return r < me && host[r] == host[me]; });
  agreed_check(world, [&] {
    if (!writer) return;
    const fs::path target = fs::path(path) / where;
    try {
      std::error_code ec;
      fs::create_directories(target, ec);
      if (!settings.empty()) write_file_atomic((target / "config.toml").string(), settings);
      write_file_atomic((target / "manifest.json").string(), manifest);
      if (where != ".")
        write_file_atomic((target.parent_path() / "latest").string(),
                          target.filename().string() + "\n");
    } catch (const Error& e) {
      LOOM_USAGE(e.what(), "; rank ", source, " holds the checkpoint's manifest, rank ", me,
                 " cannot copy it into its folder: make '", path, "' writable on its host");
    }
  });
  world.barrier()->wait();  // every host's writer done
  agreed_check(world, [&] {
    *saved = read_manifest(path, dir, /*quiet=*/true);
    if (saved->step != newest)
      LOOM_USAGE("checkpoint '", path, "' is step ", saved->step, " here and step ", newest,
                 " on rank ", source, "'s host; resume from one step folder");
  });
  log::info0(detail::concat("the manifest of checkpoint step ", newest, " copied from rank ",
                            ranks_named({source}), " to ranks ", ranks_named(lacking)));
}

Fetched fetch_missing(comm::Backend& world, const Manifest& saved, const std::string& dir,
                      const std::vector<size_t>& files, const std::string& on_failure) {
  const size_t n = saved.files.size(), ranks = static_cast<size_t>(world.size());
  // Each rank's view: which files its folder holds whole (the manifest's size), which it reads.
  std::vector<int32_t> mine(2 * n, 0), all(2 * n * ranks);
  for (size_t i = 0; i < n; ++i) {
    std::error_code ec;
    const auto size = fs::file_size(fs::path(dir) / saved.files[i].name, ec);
    mine[i] = !ec && static_cast<int64_t>(size) == saved.files[i].bytes;
  }
  for (size_t i : files) mine[n + i] = 1;
  world.all_gather(mine.data(), all.data(), 2 * n, comm::DType::Int32)->wait();
  std::vector<std::vector<bool>> here(ranks, std::vector<bool>(n)), need = here;
  for (size_t r = 0; r < ranks; ++r)
    for (size_t i = 0; i < n; ++i) {
      here[r][i] = all[2 * n * r + i] != 0;
      need[r][i] = all[2 * n * r + n + i] != 0;
    }
  const std::vector<int> host = host_groups(world.size());
  const std::vector<FileCopy> copies = fetches(host, here, need);
  if (copies.empty()) return {};
  const std::string failure = run_copies(world, copies, saved.files, dir, [&](int i) {
    return from_file((fs::path(dir) / saved.files[i].name).string());
  });
  const std::vector<int> broken = ranks_where(world, !failure.empty());
  if (!broken.empty()) throw AgreedError(detail::concat(failure, "; ", on_failure), broken.front());
  int64_t bytes = 0;
  std::vector<bool> got(ranks, false);  // by host group
  for (const FileCopy& c : copies) {
    bytes += saved.files[c.file].bytes;
    got[host[c.to]] = true;
  }
  std::vector<int> to;  // the ranks of the hosts that got files
  for (size_t r = 0; r < ranks; ++r)
    if (got[host[r]]) to.push_back(static_cast<int>(r));
  const std::string files_named = copies.size() == 1 ? " checkpoint file (" : " checkpoint files (";
  log::info0(detail::concat("fetched ", copies.size(), files_named, bytes,
                            " bytes) from other hosts for ranks ", ranks_named(to)));
  return {copies.size(), bytes};
}

void agreed_check(comm::Backend& world, const std::function<void()>& check) {
  std::string why;
  bool damaged = false;
  try {
    check();
  } catch (const UsageError& e) {
    why = e.what();
    damaged = dynamic_cast<const DamagedCheckpoint*>(&e) != nullptr;
  }
  const std::vector<int> refused = ranks_where(world, !why.empty());
  if (refused.empty()) return;
  // Rank 0 says what every rank found, else the first rank that refused, which knows why.
  const int reporter = static_cast<int>(refused.size()) == world.size() ? 0 : refused.front();
  if (ranks_where(world, damaged).size() == refused.size())
    throw AgreedDamagedCheckpoint(why, reporter);
  throw AgreedUsageError(why, reporter);
}

void check_files_seen(comm::Backend& world, const Manifest& saved, const std::string& dir,
                      const std::vector<size_t>& files) {
  // Which of the checkpoint's files this rank sees, and which any rank sees.
  std::vector<int32_t> anywhere(saved.files.size(), 0);
  for (size_t i = 0; i < saved.files.size(); ++i)
    anywhere[i] = fs::exists(fs::path(dir) / saved.files[i].name) ? 1 : 0;
  const std::vector<int32_t> here = anywhere;
  world.all_reduce(anywhere.data(), anywhere.size(), comm::DType::Int32, comm::ReduceOp::Max)
      ->wait();
  agreed_check(world, [&] {
    for (size_t i : files)
      if (!here[i] && anywhere[i])
        LOOM_USAGE("checkpoint file '", (fs::path(dir) / saved.files[i].name).string(),
                   "' is not in the folder of rank ", ranks_named({world.rank()}),
                   ", but other ranks see it: ", kNotShared);
    // A file no rank sees: the checkpoint is incomplete.
    for (size_t i : files) check_file_size(saved, dir, i);
  });
}

Gathered gather_checkpoint(comm::Backend& world, const std::string& path) {
  Gathered g;
  Manifest saved;
  agree_on_manifest(world, path, &saved, &g.dir);
  std::vector<size_t> all;
  if (world.rank() == 0)
    for (size_t i = 0; i < saved.files.size(); ++i) all.push_back(i);
  g.fetched = fetch_missing(world, saved, g.dir, all, "nothing else was gathered");
  check_files_seen(world, saved, g.dir, all);
  g.step = saved.step;
  g.files = saved.files.size();
  return g;
}

}  // namespace loom::train
