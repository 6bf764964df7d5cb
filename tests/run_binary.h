#pragma once
// Runs one of the example binaries as a user would, from a shell, and captures what it prints.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace kvinfer::test {

struct Output {
  int code = -1;  // exit status (-1: killed by a signal)
  std::string out, err;
};

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// `s` single-quoted for the shell.
inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'')
      q.append("'\\''");  // append, not "literal" + string: GCC 12 warns falsely (-Wrestrict)
    else
      q.push_back(c);
  }
  q.push_back('\'');
  return q;
}

// Runs `binary args` with `input` on stdin (never a terminal) and `env` ("NAME=value", already
// quoted as needed) set for it alone.
inline Output run_binary(const std::string& binary, const std::vector<std::string>& args, const std::string& input = "",
                         const std::string& env = "") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("kvinfer_run_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "in", std::ios::binary) << input;
  std::string cmd = env.empty() ? std::string() : env + " ";
  cmd.append(shell_quote(binary));
  for (const std::string& a : args) {
    cmd.push_back(' ');
    cmd.append(shell_quote(a));
  }
  for (const auto& [redirect, file] : {std::pair{" < ", "in"}, {" > ", "out"}, {" 2> ", "err"}}) {
    cmd.append(redirect);
    cmd.append(shell_quote(dir / file));
  }
  Output r;
  const int status = std::system(cmd.c_str());
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(dir / "out");
  r.err = slurp(dir / "err");
  fs::remove_all(dir);
  return r;
}

}  // namespace kvinfer::test
