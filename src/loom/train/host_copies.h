#pragma once
// Checkpoint files carried between hosts whose run folders are their own (node-local disks).
// A save leaves each rank's file on its own host and on the next one (so a checkpoint
// survives the loss of any one host and its disk); a resume first fetches, for each host, the
// files its ranks read and its folder lacks, from a host that has them. Files travel over the
// run's communicator, in chunks, and are checked against their size and CRC-32 on arrival.
//
// A "folder group" is a set of ranks that see one folder: the lowest rank of the set names it
// (group[r], by world rank). shared_folder.h says which ranks share.
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "loom/comm/backend.h"
#include "loom/train/checkpoint.h"

namespace loom::train {

// One file from one rank to another (indices into the list of files the caller names).
struct FileCopy {
  int file = 0;
  int from = 0, to = 0;
  bool operator==(const FileCopy&) const = default;
};

// At a save: rank r's file (index r) to a rank of each of the next `hosts` groups (all the
// others when there are fewer), the groups in a ring by their lowest rank; the k-th rank of a
// group sends to the (k mod n)-th of each (n its ranks). Ordered by file, then by group.
// Empty when every rank is in one group.
std::vector<FileCopy> copies_to_next_group(const std::vector<int>& group, int hosts = 1);

// At a resume: for every group, each file that one of its ranks needs (need[r][i]) and none of
// its ranks has (here[r][i]), once, to the lowest rank of the group that needs it, from a rank
// that has it (the senders spread over the holders). A file no rank has is left out.
std::vector<FileCopy> fetches(const std::vector<int>& group,
                              const std::vector<std::vector<bool>>& here,
                              const std::vector<std::vector<bool>>& need);

// Where a sending rank takes the bytes of a file it sends.
struct CopySource {
  size_t bytes = 0;
  // The file's bytes [at, at + n): a view of memory the caller holds, or read into `buf`.
  // Throws Error when they cannot be read.
  std::function<std::string_view(size_t at, size_t n, std::string& buf)> read;
  // Chunks of the file in flight at once; 0: all of them (its bytes are in memory already).
  size_t window = 0;
};
// `bytes`, held by the caller until the copies return (a save's own file: not copied).
CopySource in_memory(std::string_view bytes);
// The file at `path`, read as it is sent, two chunks at a time (a resume's fetch: the sender's
// memory does not grow with the file). Throws Error naming it when it cannot be opened.
CopySource from_file(const std::string& path);

// Runs `copies` (every rank of `world` calls it with the same list) over world.host_world()
// (under NCCL, a Gloo group beside it: comm/backend.h): this rank sends the files
// it is `from` of (source(i): where their bytes come from, asked for once per file before a
// byte moves) and writes those it is `to` of into `dir` under files[i].name, chunk by chunk as
// they arrive (two chunks in memory, whatever the file's size), durably and never
// half-written: a file appears once every byte arrived and matches files[i]'s size and CRC-32.
// Returns this rank's failure in one line ("" when none); the caller makes the ranks agree on
// it. A sender that cannot open or size a file stops every copy before a byte moves; one whose
// read fails later sends the rest as zeros (its receiver finds the CRC-32 wrong) and fails.
// before_write(path), when given, runs before each arriving file is written (a fault injected
// there fails that copy: fault_injection.h). A file travels in messages of chunk_bytes (16 MiB:
// past any link's bandwidth knee, well inside MPI's int count).
//
// No rank blocks while a file it sends has chunks left to post (it polls instead), so copies in
// both directions between two ranks cannot wait on each other, whatever the windows. Gloo
// reports a send or receive complete only to a wait: there a thread for each peer and
// direction waits on its operations in turn. Each operation has `options`' timeout; so has a
// rank's polling, without a chunk moving.
std::string run_copies(comm::Backend& world, const std::vector<FileCopy>& copies,
                       const std::vector<Manifest::File>& files, const std::string& dir,
                       const std::function<CopySource(int)>& source,
                       const std::function<void(const std::string&)>& before_write = {},
                       size_t chunk_bytes = size_t{16} << 20, const comm::Options& options = {});

// `text` of rank `root` on every rank of `world` (its length first), over world.host_world()
// (a manifest, metrics.jsonl: not staged through a GPU under NCCL). Collective.
void broadcast_text(comm::Backend& world, std::string& text, int root);

}  // namespace loom::train
