// loom: distributed training with pipeline and data parallelism.
#include <c10/util/Exception.h>
#include <torch/version.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "loom/cli/commands.h"
#include "loom/comm/comm_failure.h"
#include "loom/comm/world.h"
#include "loom/common/agreed_usage_error.h"
#include "loom/common/error.h"
#include "loom/common/log.h"
#include "loom/common/malloc_tuning.h"
#include "loom/flags/flags.h"
#include "loom/train/preemption.h"
#include "loom/train/run_lock.h"

namespace {

const char* kHelp = R"(usage: loom <command> [flags]
       loom --version

commands:
  train      train a model on several ranks (pipeline x data x tensor parallel)
               loom train --config configs/gpt-fortunes.toml --nproc 4
  schedule   print or draw a pipeline schedule (ascii, svg, Chrome trace, csv)
               loom schedule --schedule bfs --pp 4 --loops 2 --microbatches 8 --format ascii
  launch     run a command on N local ranks with the torchrun environment
               loom launch --nproc 2 -- build/tests/comm/comm_test
  doctor     report torch, CUDA, communication backends, BLAS, threads and cores
  simulate   predict step time, bubble, communication and memory of one configuration
  plan       search dp x pp x tp, micro-batches, loops, schedule and dp-mode for a model
  profile    measure this machine and write a cluster file for simulate and plan
  checkpoint what a checkpoint holds (info), or one consolidated file of it (convert)
               loom checkpoint info runs/gpt/checkpoint
  tokenizer  train a SentencePiece tokenizer on a text corpus
               loom tokenizer train --data /usr/share/games/fortunes --vocab 4096 --out tok.model
  generate   sample text from a checkpoint, whatever layout trained it
               loom generate --checkpoint runs/gpt/checkpoint --prompt "The " --max-tokens 80
  export     write a checkpoint as a Hugging Face model folder (config.json, model.safetensors)
               loom export --checkpoint runs/llama/checkpoint --out hf-llama --format hf
  import     make a loom checkpoint from a Hugging Face model folder
               loom import --from hf-llama --out runs/imported/checkpoint
  version    print the versions of loom and of the libtorch it runs on (also --version)

Run `loom <command> --help` (or -h) for the flags of a command. Every command reads them
the same way: --name value or --name=value, with - and _ alike in names (--seq-len is
--seq_len). Exit codes: 0 ok, 1 runtime failure, 2 bad input (one line that names the
problem and the fix).
)";

// An error on one rank of several takes the others down (abort_all); a process that is the
// whole world just exits, without MPI_Abort's banner.
bool one_of_several_ranks() {
  return loom::comm::initialized() && loom::comm::world().size() > 1;
}

int version_command(const std::vector<std::string>& args) {
  if (loom::flags::parse(args, {"version", {}}).help) {
    std::cout << "usage: loom version (or loom --version)\n";
    return 0;
  }
  std::cout << "loom " << LOOM_VERSION << "\nlibtorch " << TORCH_VERSION << "\n";
  return 0;
}

// A message of several lines (a library's, with its context) as one.
std::string one_line(std::string msg) {
  while (!msg.empty() && msg.back() == '\n') msg.pop_back();
  for (size_t at = msg.find('\n'); at != std::string::npos; at = msg.find('\n', at))
    msg.replace(at, 1, "; ");
  return msg;
}

// A failure at run time: one line naming the rank, every rank stopped, exit 1.
[[noreturn]] void runtime_failure(const std::string& msg) {
  if (msg.rfind("[rank ", 0) == 0 || !one_of_several_ranks())  // names the rank, or needs not
    std::fprintf(stderr, "loom: error: %s\n", msg.c_str());
  else
    std::fprintf(stderr, "[rank %d] loom: error: %s\n", loom::log::rank(), msg.c_str());
  if (one_of_several_ranks()) loom::comm::abort_all(1);
  loom::comm::exit_alone(1);
}

}  // namespace

int main(int argc, char** argv) {
  loom::tune_malloc_for_training();
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::fprintf(stderr, "loom: error: no command given; run `loom --help` for the list\n");
    return 2;
  }
  if (args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::cout << kHelp;
    return 0;
  }
  std::string cmd = args[0];
  std::vector<std::string> rest(args.begin() + 1, args.end());
  try {
    if (cmd == "train") return loom::cli::train_command(rest, "/proc/self/exe", &argc, &argv);
    if (cmd == "schedule") return loom::cli::schedule_command(rest);
    if (cmd == "doctor") return loom::cli::doctor_command(rest);
    if (cmd == "launch") return loom::cli::launch_command(rest);
    if (cmd == "simulate") return loom::cli::simulate_command(rest);
    if (cmd == "plan") return loom::cli::plan_command(rest);
    if (cmd == "profile") return loom::cli::profile_command(rest);
    if (cmd == "checkpoint") return loom::cli::checkpoint_command(rest, &argc, &argv);
    if (cmd == "tokenizer") return loom::cli::tokenizer_command(rest);
    if (cmd == "generate") return loom::cli::generate_command(rest);
    if (cmd == "export") return loom::cli::export_command(rest);
    if (cmd == "import") return loom::cli::import_command(rest);
    if (cmd == "version" || cmd == "--version") return version_command(rest);
    std::fprintf(stderr, "loom: error: unknown command '%s'; run `loom --help` for the list\n",
                 cmd.c_str());
    return 2;
  } catch (const loom::UsageError& e) {
    if (one_of_several_ranks()) {
      std::fprintf(stderr, "[rank %d] loom: error: %s\n", loom::log::rank(), e.what());
      loom::comm::abort_all(2);
    }
    std::fprintf(stderr, "loom: error: %s\n", e.what());
    loom::train::remove_unused_output_folder();  // a run refused after its folder was made
    loom::comm::exit_alone(2);
  } catch (const loom::AgreedError& e) {  // every rank has it: one says it, all end together
    // Bad input (AgreedUsageError) exits 2 as a UsageError does, a runtime failure 1.
    const bool usage = dynamic_cast<const loom::AgreedUsageError*>(&e) != nullptr;
    if (!one_of_several_ranks()) {
      if (!usage) runtime_failure(e.what());
      std::fprintf(stderr, "loom: error: %s\n", e.what());
      loom::train::remove_unused_output_folder();
      loom::comm::exit_alone(2);
    }
    if (loom::comm::world().rank() == e.reporter())
      std::fprintf(stderr, "loom: error: %s\n", e.what());
    loom::comm::exit_together(usage ? 2 : 1);
  } catch (const loom::comm::CommFailure& e) {
    // Most often another rank's failure, seen from here: the launcher that stops this rank
    // for it names that rank. Stopped within 2 s, this rank leaves without a line of its own.
    if (one_of_several_ranks() && loom::train::stop_handlers_installed()) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      while (!loom::train::local_stop_signal() && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      if (loom::train::local_stop_signal()) {
        std::fflush(stdout);
        std::_Exit(1);  // a failed rank all the same (the launcher counts the first one)
      }
    }
    runtime_failure(e.what());
  } catch (const c10::Error& e) {  // what() carries a C++ backtrace: the message alone
    runtime_failure(one_line(e.what_without_backtrace()));
  } catch (const std::bad_alloc&) {  // its what() is "std::bad_alloc": say what it means
    runtime_failure(
        "out of memory: an allocation failed (std::bad_alloc); lower the batch, the model or the "
        "ranks on this machine (loom simulate --from-config shows the memory per rank)");
  } catch (const std::exception& e) {
    runtime_failure(e.what());
  }
}
