// The HTTP/1.1 side of `ferrox serve`: a listener and one thread per
// connection with blocking Beast reads and writes over FdStream, whose waits
// end at a deadline: a whole request must arrive within read_timeout (so a
// client trickling headers a byte at a time cannot hold a thread), and a
// client that stops reading is dropped after write_timeout. Blocking I/O
// keeps a streamed response a plain loop on its connection's thread; the
// connection limit bounds the threads. Between requests a connection is idle:
// it is closed after idle_timeout, and first of all when the table is full.
// A few connections past the limit may only ask /health and /ready, so that
// an orchestrator's probes are answered however busy the table is.
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
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "ferrox/config.h"
#include "ferrox/expected.h"
#include "memory_budget.h"

namespace ferrox::server {

using HttpRequest = boost::beast::http::request<boost::beast::http::string_body>;
using Headers = std::vector<std::pair<std::string, std::string>>;

// What a request may hold while it is read, parsed and tokenized, as a
// multiple of its body: the body, its JSON values (16-byte values and 48-byte
// object members for as little as 2 bytes of text: up to 32x), and the
// tokenizer's work on its text (measured: /tokenize of 3.8 MB of words grew
// the process by 61x, the BPE's per-byte symbols and merge queue).
inline constexpr uint64_t kRequestMemoryFactor = 64;

// The nice value of a connection thread once it carries a bulk body.
inline constexpr int kBulkNice = 19;

// The server section's settings (ferrox/server_settings.h) as the transport
// uses them; the rest are fixed here.
struct HttpLimits {
    uint32_t max_header_bytes = 16 * 1024;
    std::chrono::seconds write_timeout{30};  // a client that stops reading is dropped
    uint32_t probe_reserve = 8;              // connections past the limit for the probes
    std::vector<std::string> probe_targets{"/health", "/ready"};
    uint64_t max_body_bytes;
    std::chrono::seconds read_timeout;  // to receive one whole request, from its first byte
    std::chrono::seconds idle_timeout;  // between requests on a keep-alive connection
    uint32_t max_connections;
    uint32_t max_client_connections;  // per peer address
    uint64_t request_memory;          // bytes, for all requests together
    // A body larger than this makes its connection's thread bulk work: it is
    // read, parsed and tokenized at nice kBulkNice (see yield_cpu_to_decoding).
    uint64_t bulk_body_bytes = 64 * 1024;
};
HttpLimits http_limits(const ServerConfig& config);

// True when every address `host` names is a loopback one.
bool is_loopback_host(const std::string& host);

class Connection;

// The body of an error the transport answers by itself (malformed HTTP, a
// request too large or too slow, a full connection table, a handler that
// sent nothing): the API layer shapes it, so this layer knows no API dialect.
// `target` is the request's target when its header was read, else empty.
struct ErrorBody {
    std::string content_type;
    std::string body;
};
using ErrorFormatter =
    std::function<ErrorBody(int status, std::string_view message, std::string_view target)>;

// What a handler answers with: one whole response, or a stream of chunks
// (Server-Sent Events) after the headers.
class Responder {
  public:
    Responder(Connection& connection, MemoryBudget::Charge* charge = nullptr)
        : connection_(connection), charge_(charge) {}
    void send(int status, std::string_view content_type, std::string body, Headers extra = {});
    bool start_stream(int status, std::string_view content_type, Headers extra = {});
    bool write_chunk(std::string_view data);  // false once the client is gone
    void end_stream();
    // True when the peer is known to be gone (checked without blocking): a
    // reset, or a failed write. A FIN alone is a half-close (RFC 9112 9.6: the
    // client may still read the answer); it is answered by one urgent byte,
    // which a peer that closed altogether answers with a reset (the byte is
    // kept out of the data stream a client reads).
    bool client_gone();
    // The request no longer holds more than `bytes` of what it was charged.
    void keep_memory(uint64_t bytes) {
        if (charge_) charge_->shrink_to(bytes);
    }
    bool sent() const { return sent_; }
    // What the log and metrics record when it differs from the status line
    // already sent: 499 for a stream whose client left.
    void set_outcome(int status) { status_ = status; }
    int status() const { return status_; }

  private:
    Connection& connection_;
    MemoryBudget::Charge* charge_;
    bool sent_ = false, streaming_ = false, failed_ = false, probed_ = false;
    int status_ = 0;
};

using Handler = std::function<void(const HttpRequest&, Responder&)>;

class HttpServer {
  public:
    HttpServer(HttpLimits limits, Handler handler, ErrorFormatter format_error);
    ~HttpServer();
    HttpServer(const HttpServer&) = delete;
    HttpServer& operator=(const HttpServer&) = delete;

    // Binds and starts accepting; the bound port (port 0 picks one) is port().
    Expected<void> start(const std::string& host, uint16_t port);
    uint16_t port() const { return port_; }
    const MemoryBudget& memory() const { return memory_; }
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
    // Takes the connection into the table, closing the longest-idle one if
    // the table is full; false (and a 503 sent) when it cannot be taken.
    bool admit(const std::shared_ptr<Connection>& connection);
    void refuse(Connection& connection, std::string why, std::string_view target = {});
    void send_error(Responder& responder, int status, std::string_view why, Headers extra = {},
                    std::string_view target = {});
    void set_idle(Connection& connection, bool idle);
    void forget(Connection& connection);

    HttpLimits limits_;
    Handler handler_;
    ErrorFormatter format_error_;
    int listen_fd_ = -1;
    uint16_t port_ = 0;
    std::thread acceptor_;
    mutable std::mutex m_;
    std::condition_variable all_closed_;
    std::map<Connection*, std::shared_ptr<Connection>> open_;
    std::map<std::string, uint32_t> per_client_;  // open connections by peer address
    MemoryBudget memory_;
    bool stopping_ = false;
    size_t handling_ = 0;  // handlers running now
};

}  // namespace ferrox::server
