#include "loom/train/metrics_copies.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <vector>

#include "loom/common/files.h"
#include "loom/train/host_copies.h"
#include "loom/train/step_metrics.h"

namespace loom::train {

namespace fs = std::filesystem;

namespace {

std::string read_if_there(const std::string& path) {
  std::error_code ec;
  return fs::exists(path, ec) ? read_file(path) : std::string();
}

}  // namespace

MetricsCopies::MetricsCopies(comm::Backend& world, std::string path, bool writer)
    : world_(world), path_(std::move(path)), writer_(writer || world.rank() == 0) {}

void MetricsCopies::align(int64_t step) {
  std::string mine;
  int64_t lines = -1;  // not a writer
  if (writer_) {
    mine = steps_up_to(read_if_there(path_), step);
    lines = std::count(mine.begin(), mine.end(), '\n');
  }
  std::vector<int64_t> all(static_cast<size_t>(world_.size()));
  world_.all_gather(&lines, all.data(), 1, comm::DType::Int64)->wait();
  // The longest history; rank 0's where it is as long as any.
  const int source = static_cast<int>(std::max_element(all.begin(), all.end()) - all.begin());
  std::string text = world_.rank() == source ? mine : std::string();
  broadcast_text(world_, text, source);
  if (writer_ && read_if_there(path_) != text) write_file_atomic(path_, text);
  sent_ = text.size();
  started_ = true;
}

void MetricsCopies::copy_new_lines() {
  std::string lines;
  if (world_.rank() == 0) {
    std::ifstream in(path_, std::ios::binary);
    in.seekg(static_cast<std::streamoff>(sent_));
    lines.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  broadcast_text(world_, lines, 0);
  sent_ += lines.size();
  if (writer_ && world_.rank() != 0) {
    if (!started_) {
      write_file_atomic(path_, lines);
    } else if (!lines.empty()) {
      LineFile file(path_, /*truncate=*/false);
      std::istringstream each(lines);
      for (std::string line; std::getline(each, line);) file.append(line);
    }
  }
  started_ = true;
}

}  // namespace loom::train
