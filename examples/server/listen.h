#pragma once
// Where kvinfer-server listens: the --host value checked before anything loads, the socket options
// (an address in use is an error, never shared), and why a bind failed, in words.
#include <httplib.h>

#include <string>

namespace server {

// Throws tool::UsageError naming --host when `host` is no address this machine can resolve.
void check_host(const std::string& host);

// SO_REUSEADDR alone: a restart may reuse a port in TIME_WAIT, but a port another process listens
// on is refused (httplib's default, SO_REUSEPORT, would silently share it).
void set_listen_options(httplib::Server& http);

// Binds `http` to host:port (0: any free port) and returns the port, or throws kvinfer::Error
// (InvalidArgument) "--host/--port: cannot listen on HOST:PORT: <why>" ("address already in use",
// "permission denied", "cannot assign requested address").
int bind_or_throw(httplib::Server& http, const std::string& host, int port);

}  // namespace server
