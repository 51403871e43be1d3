#pragma once
// A checkpoint read on hosts whose run folders may be their own (node-local disks): the ranks
// agree on the manifest they read and each host fetches the files its ranks read and its folder
// lacks from another host's (host_copies.h). Every function is a collective over `world`; a
// refusal is said once (AgreedUsageError: exit 2 on every rank).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "loom/comm/backend.h"
#include "loom/common/agreed_usage_error.h"
#include "loom/train/checkpoint.h"

namespace loom::train {

class AgreedDamagedCheckpoint : public AgreedUsageError {
 public:
  using AgreedUsageError::AgreedUsageError;
};

// Runs `check` on every rank. A UsageError on every rank: rank 0 says it; on some: the first
// of them says it (AgreedUsageError on every rank; AgreedDamagedCheckpoint where every rank
// that refused found a DamagedCheckpoint).
void agreed_check(comm::Backend& world, const std::function<void()>& check);

// The manifest every rank reads: the newest step any rank finds at `path` (a step folder, or
// its parent with `latest`), copied into the folders of the hosts that lack it. `dir`: the step
// folder.
void agree_on_manifest(comm::Backend& world, const std::string& path, Manifest* saved,
                       std::string* dir);

struct Fetched {
  size_t files = 0;
  int64_t bytes = 0;
};
// Each host's ranks get the files of `files` (this rank's reads) that its folder lacks, from
// another host's, checked on arrival. A copy that fails: AgreedError, its line ending in
// "; <on_failure>".
Fetched fetch_missing(comm::Backend& world, const Manifest& saved, const std::string& dir,
                      const std::vector<size_t>& files, const std::string& on_failure);

// Every file in `files` (this rank's reads) is there whole, or one line says which is not and
// whether another rank sees it.
void check_files_seen(comm::Backend& world, const Manifest& saved, const std::string& dir,
                      const std::vector<size_t>& files);

// `loom checkpoint gather`: every file of the newest checkpoint any rank finds at `path` in
// rank 0's folder (the manifest too), fetched from the hosts that hold them.
struct Gathered {
  std::string dir;  // the step folder
  int64_t step = 0;
  size_t files = 0;  // the checkpoint's
  Fetched fetched;   // of them, from other hosts
};
Gathered gather_checkpoint(comm::Backend& world, const std::string& path);

}  // namespace loom::train
