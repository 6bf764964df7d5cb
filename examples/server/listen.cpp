#include "listen.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <memory>

#include <fmt/format.h>

#include "core/input_file.h"
#include "kvinfer/error.h"
#include "tool.h"

namespace server {

namespace {

using AddrInfo = std::unique_ptr<addrinfo, decltype(&freeaddrinfo)>;

// getaddrinfo as httplib calls it for a listening socket.
AddrInfo resolve(const std::string& host, int port, int& status) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* result = nullptr;
  const std::string service = std::to_string(port);
  status = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &result);
  return AddrInfo(status == 0 ? result : nullptr, freeaddrinfo);
}

void reuse_address(int sock) {
  const int yes = 1;
  ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
}

// Why host:port cannot be bound: a bind of our own, for its errno (httplib reports only false).
std::string bind_failure(const std::string& host, int port) {
  int status = 0;
  const AddrInfo ai = resolve(host, port, status);
  if (status != 0) return gai_strerror(status);
  int err = 0;
  for (const addrinfo* a = ai.get(); a != nullptr; a = a->ai_next) {
    const int sock = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (sock < 0) {
      err = errno;
      continue;
    }
    reuse_address(sock);
    const bool bound = ::bind(sock, a->ai_addr, a->ai_addrlen) == 0 && ::listen(sock, 1) == 0;
    err = errno;
    ::close(sock);
    if (bound) return "the address was taken while the server tried it; try again";
  }
  return kvinfer::errno_text(err);
}

}  // namespace

void check_host(const std::string& host) {
  int status = 0;
  const AddrInfo ai = resolve(host, 0, status);
  if (status != 0)
    throw tool::UsageError(fmt::format("--host {}: not an address this machine can listen on ({})", host,
                                       gai_strerror(status)));
}

void set_listen_options(httplib::Server& http) { http.set_socket_options(reuse_address); }

int bind_or_throw(httplib::Server& http, const std::string& host, int port) {
  const int bound = port == 0 ? http.bind_to_any_port(host) : (http.bind_to_port(host, port) ? port : -1);
  if (bound <= 0)
    throw kvinfer::Error(kvinfer::ErrorKind::InvalidArgument,
                         fmt::format("--host/--port: cannot listen on {}:{}: {}", host, port, bind_failure(host, port)));
  return bound;
}

}  // namespace server
