#pragma once
// Checkpoint state of one object (a stage's data-parallel mode, a stage's optimizer): the
// trainer writes each into its own sub-archive of the rank's checkpoint file.
#include <torch/serialize/archive.h>

namespace loom::parallel {

class StateDict {
 public:
  virtual ~StateDict() = default;
  virtual void save(torch::serialize::OutputArchive& ar) const = 0;
  virtual void load(torch::serialize::InputArchive& ar) = 0;
};

}  // namespace loom::parallel
