// Files nothing may find half-written (common/files.h). A file-size limit (RLIMIT_FSIZE) makes
// a write fail part-way, as a full disk does.
#include "loom/common/files.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <string>

#include "loom/common/error.h"

namespace fs = std::filesystem;

namespace {

class Files : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("loom_files_test_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string at(const std::string& name) const { return (dir_ / name).string(); }
  // Entries in the folder, to see that nothing temporary is left.
  size_t entries() const {
    return static_cast<size_t>(std::distance(fs::directory_iterator(dir_), {}));
  }
  fs::path dir_;
};

// Writes beyond `bytes` fail with EFBIG (SIGXFSZ ignored) while it lives.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    ::getrlimit(RLIMIT_FSIZE, &old_);
    previous_ = std::signal(SIGXFSZ, SIG_IGN);
    rlimit lim = old_;
    lim.rlim_cur = bytes;
    ::setrlimit(RLIMIT_FSIZE, &lim);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &old_);
    std::signal(SIGXFSZ, previous_);
  }

 private:
  rlimit old_{};
  void (*previous_)(int) = nullptr;
};

}  // namespace

TEST_F(Files, AtomicFileAppearsWholeOnCommitOnly) {
  loom::write_file_atomic(at("a"), "old");
  {
    loom::AtomicFile f(at("a"));
    f.write("new content");
    f.write_at(0, "NEW");
    EXPECT_EQ(loom::read_file(at("a")), "old");  // not before commit
    f.commit();
  }
  EXPECT_EQ(loom::read_file(at("a")), "NEW content");
  {
    loom::AtomicFile dropped(at("a"));
    dropped.write("never committed");
  }
  EXPECT_EQ(loom::read_file(at("a")), "NEW content");
  EXPECT_EQ(entries(), 1u);  // no temporary file left
}

TEST_F(Files, AFailedWriteKeepsTheOldFileAndLeavesNothing) {
  loom::write_file_atomic(at("a"), "old");
  {
    FileSizeLimit limit(1000);
    EXPECT_THROW(loom::write_file_atomic(at("a"), std::string(5000, 'x')), loom::Error);
  }
  EXPECT_EQ(loom::read_file(at("a")), "old");
  EXPECT_EQ(entries(), 1u);
}

TEST_F(Files, FailuresNameTheFileAndAreUsageErrorsWithAFix) {
  const std::string nowhere = at("missing/folder/f");
  try {
    loom::AtomicFile f(nowhere);
    FAIL() << "created in a missing folder";
  } catch (const loom::UsageError&) {
    FAIL() << "an Error without a fix, not a UsageError";
  } catch (const loom::Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot create '" + nowhere + "'"), std::string::npos)
        << e.what();
  }
  try {
    loom::AtomicFile f(nowhere, "choose another --out");
    FAIL() << "created in a missing folder";
  } catch (const loom::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("; choose another --out"), std::string::npos) << e.what();
  }
  EXPECT_THROW(loom::read_file(nowhere), loom::Error);
}

TEST_F(Files, ReadFileReadsWhateverTheFileHolds) {
  // Large, with every byte value (read in one sized read), and empty.
  std::string bytes(3'000'001, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 131 % 256);
  loom::write_file_atomic(at("big"), bytes);
  EXPECT_EQ(loom::read_file(at("big")), bytes);
  loom::write_file_atomic(at("empty"), "");
  EXPECT_EQ(loom::read_file(at("empty")), "");
  // A file whose length says nothing of what it holds (the kernel's: length 0).
  const std::string status = loom::read_file("/proc/self/status");
  EXPECT_NE(status.find("\nVmRSS:"), std::string::npos) << status;
  EXPECT_EQ(status.back(), '\n');
  // A folder, and a file that is not there, are named with the reason.
  try {
    (void)loom::read_file(dir_.string());
    FAIL() << "read a folder";
  } catch (const loom::Error& e) {
    EXPECT_NE(std::string(e.what()).find(dir_.string()), std::string::npos) << e.what();
  }
  try {
    (void)loom::read_file(at("missing"));
    FAIL() << "read a missing file";
  } catch (const loom::Error& e) {
    EXPECT_NE(std::string(e.what()).find("No such file"), std::string::npos) << e.what();
  }
}

TEST_F(Files, LineFileGrowsByWholeLines) {
  {
    loom::LineFile f(at("m.jsonl"), /*truncate=*/true);
    f.append("one");
    f.append("two");
  }
  {
    loom::LineFile again(at("m.jsonl"), /*truncate=*/false);
    again.append("three");
  }
  EXPECT_EQ(loom::read_file(at("m.jsonl")), "one\ntwo\nthree\n");
  { loom::LineFile fresh(at("m.jsonl"), /*truncate=*/true); }
  EXPECT_EQ(loom::read_file(at("m.jsonl")), "");
}

TEST_F(Files, ALineCutShortIsRemoved) {
  loom::LineFile f(at("m.jsonl"), /*truncate=*/true);
  f.append(std::string(60, 'a'));  // 61 bytes
  {
    FileSizeLimit limit(100);  // the next line stops after 39 of its 61 bytes
    try {
      f.append(std::string(60, 'b'));
      FAIL() << "wrote past the limit";
    } catch (const loom::Error& e) {
      EXPECT_NE(std::string(e.what()).find("cannot write '" + at("m.jsonl") + "'"),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_EQ(loom::read_file(at("m.jsonl")), std::string(60, 'a') + "\n");
  f.append("c");  // and it goes on from there once there is room
  EXPECT_EQ(loom::read_file(at("m.jsonl")), std::string(60, 'a') + "\nc\n");
}

TEST_F(Files, AtomicFolderAppearsWholeOnCommitOnly) {
  {
    loom::AtomicFolder folder(at("out"));
    loom::write_file_atomic(folder.file("a"), "1");
    loom::write_file_atomic(folder.file("b"), "2");
    EXPECT_FALSE(fs::exists(at("out")));  // not before commit
    folder.commit();
  }
  EXPECT_EQ(loom::read_file(at("out/a")), "1");
  EXPECT_EQ(loom::read_file(at("out/b")), "2");
  {
    loom::AtomicFolder dropped(at("other"));
    loom::write_file_atomic(dropped.file("a"), "never committed");
  }
  EXPECT_FALSE(fs::exists(at("other")));
  EXPECT_EQ(entries(), 1u);  // "out" only: no temporary folder left
}

TEST_F(Files, AtomicFolderReplacesAnEmptyFolderOnly) {
  fs::create_directories(at("empty"));
  {
    loom::AtomicFolder folder(at("empty/"));  // a trailing slash names the same folder
    loom::write_file_atomic(folder.file("a"), "1");
    folder.commit();
  }
  EXPECT_EQ(loom::read_file(at("empty/a")), "1");
  {
    loom::AtomicFolder again(at("empty"), "choose another --out");
    loom::write_file_atomic(again.file("b"), "2");
    EXPECT_THROW(again.commit(), loom::UsageError);  // "empty" holds a file now
  }
  EXPECT_FALSE(fs::exists(at("empty/b")));
  EXPECT_EQ(entries(), 1u);
}

TEST_F(Files, AFailedWriteInsideAnAtomicFolderLeavesNothing) {
  {
    FileSizeLimit limit(1000);
    loom::AtomicFolder folder(at("deep/out"));  // creates the missing parent
    loom::write_file_atomic(folder.file("small"), "fits");
    EXPECT_THROW(loom::write_file_atomic(folder.file("large"), std::string(5000, 'x')),
                 loom::Error);
  }
  EXPECT_TRUE(fs::is_empty(at("deep")));
}

TEST_F(Files, AWritablePathIsCheckedBeforeTheWork) {
  const std::string fix = "pass another --out";
  auto refusal = [&](const std::string& path, bool make_folder) -> std::string {
    try {
      loom::check_writable_path(path, fix, make_folder);
    } catch (const loom::UsageError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(refusal("", false).find("empty; " + fix), std::string::npos);
  EXPECT_NE(refusal(dir_.string(), false).find("is a folder, not a file; " + fix),
            std::string::npos);
  EXPECT_NE(refusal(at("no/f.toml"), false).find("does not exist; " + fix), std::string::npos);
  EXPECT_EQ(refusal(at("f.toml"), false), "");
  EXPECT_EQ(refusal(at("made/f.toml"), true), "");
  EXPECT_TRUE(fs::is_directory(at("made")));
  EXPECT_FALSE(fs::exists(at("f.toml")));  // only checked, and the probe is gone
  EXPECT_EQ(std::distance(fs::directory_iterator(at("made")), {}), 0);
  if (::geteuid() != 0) {  // root writes into a read-only folder
    fs::create_directories(at("ro"));
    fs::permissions(at("ro"), fs::perms::owner_read | fs::perms::owner_exec);
    EXPECT_NE(refusal(at("ro/f.toml"), false).find("cannot write into"), std::string::npos);
  }
}
