#pragma once
// Subcommands of the loom tool. Each returns the process exit code and throws UsageError for
// bad input (main prints it as one line and exits 2).
#include <string>
#include <vector>

namespace loom::cli {

int train_command(const std::vector<std::string>& args, const std::string& self, int* argc,
                  char*** argv);
int schedule_command(const std::vector<std::string>& args);
int doctor_command(const std::vector<std::string>& args);
int launch_command(const std::vector<std::string>& args);
int simulate_command(const std::vector<std::string>& args);
int plan_command(const std::vector<std::string>& args);
int profile_command(const std::vector<std::string>& args);
// argc, argv: for the communication library (gather runs as one process per host).
int checkpoint_command(const std::vector<std::string>& args, int* argc, char*** argv);
int tokenizer_command(const std::vector<std::string>& args);
int generate_command(const std::vector<std::string>& args);
int export_command(const std::vector<std::string>& args);
int import_command(const std::vector<std::string>& args);

}  // namespace loom::cli
