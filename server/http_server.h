// The HTTP/1.1 side of `ferrox serve`: a listener and one thread per
// connection with blocking Beast reads and writes over FdStream, whose waits
// end at a deadline: a whole request must arrive within read_timeout (so a
// client trickling headers a byte at a time cannot hold a thread), and a
// client that stops reading is dropped after write_timeout. Blocking I/O
// keeps a streamed response a plain loop on its connection's thread; the
// connection limit bounds the threads.
#pragma once

#include <boost/beast/http.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ferrox/expected.h"

namespace ferrox::server {

using HttpRequest = boost::beast::http::request<boost::beast::http::string_body>;
using Headers = std::vector<std::pair<std::string, std::string>>;

struct HttpLimits {
    uint32_t max_header_bytes = 16 * 1024;
    uint64_t max_body_bytes = 4u << 20;
    std::chrono::seconds read_timeout{30};   // to receive one whole request, idle time included
    std::chrono::seconds write_timeout{30};  // a client that stops reading is dropped
    uint32_t max_connections = 256;
};

class Connection;

// {"error": {"message": ..., "type": ...}}, as OpenAI's API answers a refused request.
std::string error_json(std::string_view message, std::string_view type);

// What a handler answers with: one whole response, or a stream of chunks
// (Server-Sent Events) after the headers.
class Responder {
  public:
    explicit Responder(Connection& connection) : connection_(connection) {}
    void send(int status, std::string_view content_type, std::string body, Headers extra = {});
    bool start_stream(int status, std::string_view content_type, Headers extra = {});
    bool write_chunk(std::string_view data);  // false once the client is gone
    void end_stream();
    // True when the peer closed or reset the connection (checked without blocking).
    bool client_gone() const;
    bool sent() const { return sent_; }
    // What the log and metrics record when it differs from the status line
    // already sent: 499 for a stream whose client left.
    void set_outcome(int status) { status_ = status; }
    int status() const { return status_; }

  private:
    Connection& connection_;
    bool sent_ = false, streaming_ = false, failed_ = false;
    int status_ = 0;
};

using Handler = std::function<void(const HttpRequest&, Responder&)>;

class HttpServer {
  public:
    HttpServer(HttpLimits limits, Handler handler);
    ~HttpServer();
    HttpServer(const HttpServer&) = delete;
    HttpServer& operator=(const HttpServer&) = delete;

    // Binds and starts accepting; the bound port (port 0 picks one) is port().
    Expected<void> start(const std::string& host, uint16_t port);
    uint16_t port() const { return port_; }
    // No new connections; open ones go on.
    void stop_accepting();
    // Closes every connection (a handler mid-response sees its writes fail)
    // and waits up to `grace` for their threads.
    void stop(std::chrono::milliseconds grace);
    size_t open_connections() const;
    // Waits until no handler is running (idle keep-alive connections do not
    // count), at most `timeout`; true when none is.
    bool wait_handlers_done(std::chrono::milliseconds timeout);

  private:
    friend class Connection;
    void accept_loop();
    void serve(std::shared_ptr<Connection> connection);

    HttpLimits limits_;
    Handler handler_;
    int listen_fd_ = -1;
    uint16_t port_ = 0;
    std::thread acceptor_;
    mutable std::mutex m_;
    std::condition_variable all_closed_;
    std::map<Connection*, std::shared_ptr<Connection>> open_;
    bool stopping_ = false;
    size_t handling_ = 0;  // handlers running now
};

}  // namespace ferrox::server
