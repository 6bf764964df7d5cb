// kvinfer::OutputFile (src/core/output_file.h): only regular files (or new paths) are replaced, a
// failed or interrupted write leaves the target as it was and no temporary, and a later write
// removes the temporaries of writers that died.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/output_file.h"
#include "kvinfer/error.h"
#include "run_binary.h"

namespace kvinfer {
namespace {

namespace fs = std::filesystem;
using testing::AllOf;
using testing::HasSubstr;

class OutputFileTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kvinfer_output_file_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The names in dir_ that look like a temporary of `name`.
  std::vector<std::string> temporaries(const std::string& name) const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_))
      if (e.path().filename().string().starts_with(name + ".tmp-")) out.push_back(e.path().filename().string());
    return out;
  }
  std::string error_writing(const fs::path& p) const {
    try {
      write_output_file(p, "data");
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::BadFile);
      return e.what();
    }
    return "";
  }

  fs::path dir_;
};

TEST_F(OutputFileTest, WritesANewFileAndReplacesARegularOne) {
  const fs::path p = dir_ / "out.bin";
  write_output_file(p, "first");
  EXPECT_EQ(test::slurp(p), "first");
  write_output_file(p, "second, longer");
  EXPECT_EQ(test::slurp(p), "second, longer");
  EXPECT_TRUE(temporaries("out.bin").empty());
}

// A FIFO, a directory, a socket and (where mknod is allowed) a character device are refused before
// anything is written, and are still what they were afterwards: a rename would have replaced them.
TEST_F(OutputFileTest, RefusesEveryTargetThatIsNotARegularFile) {
  const fs::path fifo = dir_ / "fifo", sub = dir_ / "sub", sock = dir_ / "sock", dev = dir_ / "full";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  fs::create_directories(sub);
  const int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", sock.c_str());
  ASSERT_EQ(::bind(s, reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
  // /dev/full's numbers, in our own directory: a test that got this wrong must not break the real one.
  const bool have_device = ::mknod(dev.c_str(), S_IFCHR | 0600, makedev(1, 7)) == 0;

  EXPECT_THAT(error_writing(fifo), AllOf(HasSubstr(fifo.string()), HasSubstr("a FIFO"), HasSubstr("regular files")));
  EXPECT_THAT(error_writing(sub), AllOf(HasSubstr(sub.string()), HasSubstr("a directory")));
  EXPECT_THAT(error_writing(sock), AllOf(HasSubstr(sock.string()), HasSubstr("a socket")));
  struct stat st {};
  ASSERT_EQ(::lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  ASSERT_EQ(::lstat(sock.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_TRUE(fs::is_directory(sub));
  EXPECT_TRUE(fs::is_empty(sub));
  if (have_device) {
    EXPECT_THAT(error_writing(dev), AllOf(HasSubstr(dev.string()), HasSubstr("a character device")));
    ASSERT_EQ(::lstat(dev.c_str(), &st), 0);
    EXPECT_TRUE(S_ISCHR(st.st_mode));
  }
  ::close(s);
  EXPECT_TRUE(temporaries("fifo").empty());
  EXPECT_TRUE(temporaries("full").empty());
}

// A link to a regular file writes that file (the link stays a link); a link to nothing or to a
// device is refused.
TEST_F(OutputFileTest, FollowsALinkToARegularFileOnly) {
  const fs::path real = dir_ / "real.bin", link = dir_ / "link.bin";
  write_output_file(real, "old");
  fs::create_symlink(real, link);
  write_output_file(link, "new");
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(test::slurp(real), "new");

  const fs::path dangling = dir_ / "dangling", to_device = dir_ / "to_null";
  fs::create_symlink(dir_ / "nothing_here", dangling);
  fs::create_symlink("/dev/null", to_device);
  EXPECT_THAT(error_writing(dangling), HasSubstr("symbolic link"));
  EXPECT_THAT(error_writing(to_device), HasSubstr("a character device"));
  EXPECT_TRUE(fs::is_symlink(dangling));
  EXPECT_FALSE(fs::exists(dir_ / "nothing_here"));
}

// An OutputFile destroyed without commit() (an exception) leaves the old file and no temporary.
TEST_F(OutputFileTest, AnUncommittedWriteLeavesTheOldFile) {
  const fs::path p = dir_ / "keep.bin";
  write_output_file(p, "old");
  {
    OutputFile f(p);
    f.write("new", 3);
    EXPECT_EQ(temporaries("keep.bin").size(), 1u);
  }
  EXPECT_EQ(test::slurp(p), "old");
  EXPECT_TRUE(temporaries("keep.bin").empty());
}

// Temporaries of writers that died (nobody holds them locked) are removed by the next successful
// write; one that a live writer holds is left.
TEST_F(OutputFileTest, ALaterWriteRemovesTheTemporariesOfDeadWriters) {
  const fs::path p = dir_ / "x.bin";
  std::ofstream(dir_ / "x.bin.tmp-AbC123") << "left by a killed run";
  std::ofstream(dir_ / "x.bin.tmp-Held42") << "being written";
  std::ofstream(dir_ / "x.bin.tmp-toolong7") << "not a temporary's name";
  const int held = ::open((dir_ / "x.bin.tmp-Held42").c_str(), O_RDONLY);
  ASSERT_EQ(::flock(held, LOCK_EX), 0);
  write_output_file(p, "data");
  EXPECT_FALSE(fs::exists(dir_ / "x.bin.tmp-AbC123"));
  EXPECT_TRUE(fs::exists(dir_ / "x.bin.tmp-Held42"));
  EXPECT_TRUE(fs::exists(dir_ / "x.bin.tmp-toolong7"));
  ::close(held);
}

// SIGTERM or SIGINT in the middle of a write: the handler removes the temporary, then the process
// ends by the signal, as it would have without the handler.
TEST_F(OutputFileTest, ASignalRemovesTheTemporaryAndEndsTheProcess) {
  for (const int sig : {SIGTERM, SIGINT, SIGHUP}) {
    const fs::path p = dir_ / "signalled.bin";
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      ::signal(sig, SIG_DFL);  // a test run in the background may inherit SIGINT ignored
      remove_temporaries_on_signal();
      OutputFile f(p);
      f.write("partial", 7);
      ::raise(sig);
      ::_exit(0);  // not reached
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status)) << "signal " << sig;
    EXPECT_EQ(WTERMSIG(status), sig);
    EXPECT_FALSE(fs::exists(p));
    EXPECT_TRUE(temporaries("signalled.bin").empty()) << "signal " << sig;
  }
}

}  // namespace
}  // namespace kvinfer
