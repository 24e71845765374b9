// The `rpa` CLI's subcommands. Each lives in its own file as `int RunX(args)`, where args
// are the words after the subcommand name; it returns the process exit code. Parsing of
// strings into typed values happens here, at the edge, never in the layers below.
#pragma once

#include <span>
#include <string_view>

namespace rpa::cli {

using Args = std::span<const std::string_view>;

struct Command {
  std::string_view name;
  std::string_view summary;
  int (*run)(Args args);
};

int RunVersion(Args args);
int RunDemo(Args args);
int RunGenerate(Args args);
int RunBenchServe(Args args);
int RunBenchModel(Args args);
int RunBenchContext(Args args);
int RunBenchAttention(Args args);
int RunCalibrate(Args args);
int RunKvSensitivity(Args args);
int RunEval(Args args);

}  // namespace rpa::cli
