// Finding the evaluation text by walking up from a start directory, and reading it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "eval/eval_inputs.h"
#include "util/error.h"

namespace rpa::eval {
namespace {

namespace fs = std::filesystem;

TEST(FindFileUpwards, WalksUpFromEachStart) {
  const fs::path root = fs::temp_directory_path() / "rpa_eval_inputs_test";
  fs::remove_all(root);
  fs::create_directories(root / "proj" / "build" / "tests");
  fs::create_directories(root / "shared" / "data");
  std::ofstream(root / "shared" / "data" / "wiki.raw") << "some text\n";

  // From proj/build/tests: proj/build/tests/.., proj/build/.., then proj/../shared exists.
  const fs::path deep = root / "proj" / "build" / "tests";
  const std::string found = FindFileUpwards("../shared/data/wiki.raw", {&deep, 1});
  EXPECT_EQ(fs::path(found), (root / "shared" / "data" / "wiki.raw").lexically_normal());
  EXPECT_EQ(ReadTextFile(found), "some text\n");

  // The first start that leads to the file wins; starts that lead nowhere are skipped.
  const fs::path starts[] = {fs::path("/"), root / "proj"};
  EXPECT_EQ(fs::path(FindFileUpwards("../shared/data/wiki.raw", starts)),
            (root / "shared" / "data" / "wiki.raw").lexically_normal());
  EXPECT_EQ(FindFileUpwards("../shared/data/missing.raw", {&deep, 1}), "");
  EXPECT_THROW(ReadTextFile((root / "missing.raw").string()), InvalidArgument);
  fs::remove_all(root);
}

}  // namespace
}  // namespace rpa::eval
