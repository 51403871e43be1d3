#pragma once
// Fault injection for the tests that prove a dying rank brings the job down and that a failed
// save loses nothing: LOOM_FAULT_RANK=r LOOM_FAULT_STEP=s kills rank r (SIGKILL, no clean-up)
// at step s; with LOOM_FAULT_KIND=hang the rank stops communicating instead (sleeps until
// SIGTERM or SIGINT), so that the others' timeouts fire; with torch-error it fails a torch
// check (an unexpected library error), with out-of-memory it throws std::bad_alloc; nan and
// disk-full, slow-write and slow-copy below. Only the first attempt of a
// job fails: under loom train --max-restarts the launcher sets LOOM_RESTART_COUNT, and a
// restart (> 0) runs clean.
#include <cstdint>
#include <string>

namespace loom::train {

void maybe_inject_fault(int rank, int64_t step);
// LOOM_FAULT_KIND=nan: rank r's loss scale at step s is NaN (its gradients, hence the
// gradient norm, become NaN), for the tests of train.on_nan. Otherwise `scale`.
double injected_loss_scale(int rank, int64_t step, double scale);
// LOOM_FAULT_KIND=disk-full: rank r's part of the checkpoint of step s cannot be written (as on
// a full disk); LOOM_FAULT_KIND=manifest-disk-full (r: a manifest writer, rank 0 or, on hosts
// without a shared run folder, a host's lowest rank): its manifest cannot; copy-disk-full
// (there): the copy of another host's rank file that rank r receives cannot. Throws the
// Error a full disk would (naming `path`) when `kind` is the one asked for this rank and step.
void inject_disk_full(int rank, int64_t step, const char* kind, const std::string& path);
// LOOM_FAULT_KIND=slow-write: rank r's writer of the checkpoint of step s waits a second before
// it serializes the state it was given (under output.async_save the next step trains
// meanwhile, so a writer given the live state instead of a copy would write changed values).
void inject_slow_write(int rank, int64_t step);
// LOOM_FAULT_KIND=slow-copy: on hosts without a shared folder, rank r's writer of the checkpoint
// of step s starts its copies to other hosts 3 s late, saying so on stderr before and after
// (the other ranks' copies wait for its files; with output.async_save the steps after s train
// meanwhile).
void inject_slow_copy(int rank, int64_t step);

}  // namespace loom::train
