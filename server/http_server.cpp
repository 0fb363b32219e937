#include "http_server.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <malloc.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <cerrno>
#include <cstring>

#include "fd_stream.h"
#include "ferrox/log.h"

namespace ferrox::server {

namespace http = boost::beast::http;
using boost::system::error_code;
using Clock = std::chrono::steady_clock;

namespace {

// Milliseconds left until `t` for poll(): -1 (forever) for time_point::max().
int poll_timeout(Clock::time_point t) {
    if (t == Clock::time_point::max()) return -1;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(t - Clock::now());
    return left.count() <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left.count(), 1 << 30));
}

error_code errno_code(int e) { return {e, boost::system::system_category()}; }

// Reading, parsing and tokenizing a large body is bulk work that must not
// slow the decode steps every running stream waits on: on 2 cores, four 4 MiB
// /tokenize clients at normal priority made a quiet client's p99 time to first
// token 4.9x its quiet value. Nice 19 gives the thread ~1.5% of a core against
// a normal one, yet it still progresses on a host kept busy by other work
// (SCHED_IDLE starved such requests until they timed out). The thread keeps it
// until its connection ends: an unprivileged thread may not lower it again.
void yield_cpu_to_decoding() {
    if (::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), kBulkNice) != 0)
        logger().warn("server: cannot lower a bulk request's CPU priority: {}",
                      std::strerror(errno));
}

constexpr uint64_t kTrimAfterBytes = 16u << 20;

}  // namespace

size_t FdStream::read_into(void* data, size_t size, error_code& ec) {
    for (;;) {
        pollfd p{fd_, POLLIN, 0};
        const int r = ::poll(&p, 1, poll_timeout(read_deadline_));
        if (r == 0) {
            ec = boost::asio::error::timed_out;
            return 0;
        }
        if (r < 0) {
            if (errno == EINTR) continue;
            ec = errno_code(errno);
            return 0;
        }
        const ssize_t n = ::recv(fd_, data, size, 0);
        if (n > 0) {
            ec = {};
            return static_cast<size_t>(n);
        }
        if (n == 0) {
            ec = boost::asio::error::eof;
            return 0;
        }
        if (errno == EINTR || errno == EAGAIN) continue;
        ec = errno_code(errno);
        return 0;
    }
}

bool FdStream::wait_readable(Clock::time_point deadline) {
    for (;;) {
        pollfd p{fd_, POLLIN, 0};
        const int r = ::poll(&p, 1, poll_timeout(deadline));
        if (r > 0) return true;
        if (r == 0) return false;
        if (errno != EINTR) return true;  // let the read report it
    }
}

size_t FdStream::write_from(const void* data, size_t size, error_code& ec) {
    const auto deadline = Clock::now() + write_timeout_;
    for (;;) {
        const ssize_t n = ::send(fd_, data, size, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n >= 0) {
            ec = {};
            return static_cast<size_t>(n);
        }
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
            ec = errno_code(errno);
            return 0;
        }
        pollfd p{fd_, POLLOUT, 0};
        const int r = ::poll(&p, 1, poll_timeout(deadline));
        if (r == 0) {
            ec = boost::asio::error::timed_out;
            return 0;
        }
        if (r < 0 && errno != EINTR) {
            ec = errno_code(errno);
            return 0;
        }
    }
}

class Connection {
  public:
    Connection(int fd, const HttpLimits& server_limits, std::string peer_address)
        : stream(fd), limits(server_limits), peer(std::move(peer_address)) {
        stream.set_write_timeout(limits.write_timeout);
    }
    ~Connection() { ::close(stream.fd()); }

    // A whole response; false when it could not be written.
    template <class Body>
    bool write(http::response<Body>& response) {
        error_code ec;
        http::write(stream, response, ec);
        return !ec;
    }

    FdStream stream;
    const HttpLimits& limits;
    const std::string peer;  // the client's address, for the per-client cap
    bool keep_alive = true;
    unsigned version = 11;
    // Guarded by the server's mutex:
    bool idle = false, evicted = false;
    bool probes_only = false;  // taken past max_connections: /health and /ready only
    Clock::time_point idle_since;
};

HttpLimits http_limits(const ServerConfig& config) {
    HttpLimits l;
    l.max_body_bytes = config.max_body_bytes;
    l.read_timeout = std::chrono::seconds(config.read_timeout);
    l.idle_timeout = std::chrono::seconds(config.idle_timeout);
    l.max_connections = config.max_connections;
    l.max_client_connections = config.max_client_connections;
    l.request_memory = config.request_memory;
    return l;
}

bool is_loopback_host(const std::string& host) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0) return false;
    bool all_loopback = found != nullptr;
    for (addrinfo* a = found; a; a = a->ai_next) {
        if (a->ai_family == AF_INET) {
            const auto* in = reinterpret_cast<const sockaddr_in*>(a->ai_addr);
            all_loopback &= (ntohl(in->sin_addr.s_addr) >> 24) == 127;
        } else if (a->ai_family == AF_INET6) {
            const auto* in6 = reinterpret_cast<const sockaddr_in6*>(a->ai_addr);
            all_loopback &= IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr) != 0;
        } else {
            all_loopback = false;
        }
    }
    ::freeaddrinfo(found);
    return all_loopback;
}

void Responder::send(int status, std::string_view content_type, std::string body, Headers extra) {
    if (sent_) return;
    sent_ = true;
    status_ = status;
    http::response<http::string_body> res{static_cast<http::status>(status), connection_.version};
    res.set(http::field::server, "ferrox");
    res.set(http::field::content_type,
            boost::beast::string_view(content_type.data(), content_type.size()));
    for (auto& [k, v] : extra) res.set(k, v);
    res.keep_alive(connection_.keep_alive);
    res.body() = std::move(body);
    res.prepare_payload();
    if (!connection_.write(res)) connection_.keep_alive = false;
}

bool Responder::start_stream(int status, std::string_view content_type, Headers extra) {
    if (sent_) return false;
    sent_ = streaming_ = true;
    status_ = status;
    http::response<http::empty_body> res{static_cast<http::status>(status), connection_.version};
    res.set(http::field::server, "ferrox");
    res.set(http::field::content_type,
            boost::beast::string_view(content_type.data(), content_type.size()));
    res.set(http::field::cache_control, "no-cache");
    for (auto& [k, v] : extra) res.set(k, v);
    res.keep_alive(connection_.keep_alive);
    res.chunked(true);
    http::response_serializer<http::empty_body> sr{res};
    error_code ec;
    http::write_header(connection_.stream, sr, ec);
    if (ec) failed_ = true;
    return !failed_;
}

bool Responder::write_chunk(std::string_view data) {
    if (!streaming_ || failed_) return false;
    if (data.empty()) return true;
    error_code ec;
    boost::asio::write(connection_.stream, http::make_chunk(boost::asio::buffer(data)), ec);
    if (ec) failed_ = true;
    return !failed_;
}

void Responder::end_stream() {
    if (!streaming_) return;
    streaming_ = false;
    error_code ec;
    if (!failed_) boost::asio::write(connection_.stream, http::make_chunk_last(), ec);
    if (failed_ || ec) connection_.keep_alive = false;
}

bool Responder::client_gone() {
    if (failed_) return true;
    pollfd p{connection_.stream.fd(), POLLRDHUP, 0};
    if (::poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLHUP | POLLERR)) return true;
    if ((p.revents & POLLRDHUP) && !probed_) {
        probed_ = true;
        const char probe = 0;
        (void)::send(connection_.stream.fd(), &probe, 1, MSG_OOB | MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    return false;
}

HttpServer::HttpServer(HttpLimits limits, Handler handler, ErrorFormatter format_error)
    : limits_(std::move(limits)),
      handler_(std::move(handler)),
      format_error_(std::move(format_error)),
      memory_(limits_.request_memory) {}

void HttpServer::send_error(Responder& responder, int status, std::string_view why, Headers extra,
                            std::string_view target) {
    ErrorBody e = format_error_ ? format_error_(status, why, target)
                                : ErrorBody{"text/plain; charset=utf-8", std::string(why)};
    responder.send(status, e.content_type, std::move(e.body), std::move(extra));
}

HttpServer::~HttpServer() { stop(std::chrono::milliseconds(2000)); }

Expected<void> HttpServer::start(const std::string& host, uint16_t port) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    addrinfo* found = nullptr;
    const std::string service = std::to_string(port);
    if (const int r = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); r != 0)
        return make_error("server.host '{}': {}", host, ::gai_strerror(r));
    std::string last_error = "no address";
    for (addrinfo* a = found; a; a = a->ai_next) {
        const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) continue;
        const int one = 1;
        ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 128) == 0) {
            listen_fd_ = fd;
            sockaddr_storage bound{};
            socklen_t len = sizeof bound;
            ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
            port_ = ntohs(bound.ss_family == AF_INET6
                              ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                              : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
            break;
        }
        last_error = std::strerror(errno);
        ::close(fd);
    }
    ::freeaddrinfo(found);
    if (listen_fd_ < 0) return make_error("cannot listen on {}:{}: {}", host, port, last_error);
    acceptor_ = std::thread([this] { accept_loop(); });
    return {};
}

void HttpServer::accept_loop() {
    for (;;) {
        sockaddr_storage peer{};
        socklen_t peer_len = sizeof peer;
        const int fd =
            ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &peer_len, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            {
                std::lock_guard lock(m_);
                if (stopping_ || listen_fd_ < 0) return;
            }
            if (errno == EMFILE || errno == ENFILE) {  // out of descriptors: wait, try again
                std::this_thread::sleep_for(std::chrono::milliseconds(50));
                continue;
            }
            return;  // the listening socket was shut down
        }
        const int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        char address[INET6_ADDRSTRLEN] = "?";
        if (peer.ss_family == AF_INET)
            ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&peer)->sin_addr, address,
                        sizeof address);
        else if (peer.ss_family == AF_INET6)
            ::inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&peer)->sin6_addr, address,
                        sizeof address);
        auto connection = std::make_shared<Connection>(fd, limits_, address);
        {
            std::lock_guard lock(m_);
            if (stopping_) return;
        }
        if (!admit(connection)) continue;
        std::thread([this, connection]() mutable { serve(std::move(connection)); }).detach();
    }
}

bool HttpServer::admit(const std::shared_ptr<Connection>& c) {
    std::unique_lock lock(m_);
    uint32_t& mine = per_client_[c->peer];
    if (mine >= limits_.max_client_connections) {
        if (mine == 0) per_client_.erase(c->peer);
        lock.unlock();
        refuse(*c, fmt::format("this client already holds {} connections "
                               "(server.max_client_connections)",
                               limits_.max_client_connections));
        return false;
    }
    size_t live = 0;  // evicted connections are on their way out
    Connection* oldest_idle = nullptr;
    for (auto& [raw, other] : open_) {
        if (other->evicted) continue;
        ++live;
        if (other->idle && (!oldest_idle || other->idle_since < oldest_idle->idle_since))
            oldest_idle = raw;
    }
    if (live >= limits_.max_connections && oldest_idle) {
        // Its thread sees the end of the stream and lets the connection go.
        oldest_idle->evicted = true;
        ::shutdown(oldest_idle->stream.fd(), SHUT_RDWR);
    } else if (live >= limits_.max_connections) {
        if (live >= limits_.max_connections + limits_.probe_reserve) {
            lock.unlock();
            refuse(*c, fmt::format("too many open connections (server.max_connections {})",
                                   limits_.max_connections));
            return false;
        }
        c->probes_only = true;
    }
    ++mine;
    open_.emplace(c.get(), c);
    return true;
}

void HttpServer::refuse(Connection& c, std::string why, std::string_view target) {
    c.keep_alive = false;
    Responder r(c);
    send_error(r, 503, why, {{"Retry-After", "1"}, {"Connection", "close"}}, target);
    // Unread bytes at close() make the kernel send a reset, which can destroy
    // the answer before the client reads it: take what has arrived, without waiting.
    ::shutdown(c.stream.fd(), SHUT_WR);
    char sink[4096];
    for (int i = 0; i < 16 && ::recv(c.stream.fd(), sink, sizeof sink, MSG_DONTWAIT) > 0; ++i) {
    }
}

namespace {

// Reads and drops a body of `length` bytes (part may be in `buffer`), within
// the read deadline, so that a refused request's client reads the refusal.
void discard_body(FdStream& stream, boost::beast::flat_buffer& buffer, uint64_t length) {
    const uint64_t held = std::min<uint64_t>(buffer.size(), length);
    buffer.consume(held);
    uint64_t left = length - held;
    char sink[16384];
    error_code ec;
    while (left > 0 && !ec)
        left -= std::min<uint64_t>(
            left,
            stream.read_some(boost::asio::buffer(sink, std::min<uint64_t>(sizeof sink, left)), ec));
}

}  // namespace

void HttpServer::set_idle(Connection& c, bool idle) {
    std::lock_guard lock(m_);
    c.idle = idle;
    if (idle) c.idle_since = Clock::now();
}

void HttpServer::forget(Connection& c) {
    std::lock_guard lock(m_);
    if (auto it = per_client_.find(c.peer); it != per_client_.end() && --it->second == 0)
        per_client_.erase(it);
    open_.erase(&c);
    if (open_.empty()) all_closed_.notify_all();
}

void HttpServer::serve(std::shared_ptr<Connection> c) {
    boost::beast::flat_buffer buffer;
    bool bulk_thread = false;
    while (c->keep_alive) {
        if (buffer.size() == 0) {  // between requests: idle until the next one starts
            set_idle(*c, true);
            const bool started = c->stream.wait_readable(Clock::now() + limits_.idle_timeout);
            set_idle(*c, false);
            {
                std::lock_guard lock(m_);
                if (c->evicted) break;
            }
            if (!started) break;  // idle_timeout: close quietly, as keep-alive allows
        }
        c->stream.set_read_deadline(Clock::now() + limits_.read_timeout);
        http::request_parser<http::string_body> parser;
        parser.header_limit(limits_.max_header_bytes);
        parser.body_limit(limits_.max_body_bytes);
        error_code ec;
        http::read_header(c->stream, buffer, parser, ec);
        // What an error answered from here on is shaped for (ErrorFormatter):
        // the target, once the request line is parsed (a body past the limit
        // stops the parser inside the header, before is_header_done()).
        const auto target = [&parser]() -> std::string {
            const auto t = parser.get().target();
            return std::string(t.data(), t.size());
        };
        MemoryBudget::Charge charge;
        if (!ec && !parser.is_done()) {
            // Charged before the body is read: a body the budget cannot hold
            // is never read (the connection is closed after the 503).
            const uint64_t body = parser.content_length().value_or(limits_.max_body_bytes);
            if (body > limits_.bulk_body_bytes && !bulk_thread) {
                yield_cpu_to_decoding();
                bulk_thread = true;
            }
            const uint64_t need = std::min(body, limits_.max_body_bytes) * kRequestMemoryFactor;
            charge = memory_.try_charge(need);
            if (charge.bytes() == 0) {
                c->version = parser.get().version();
                if (parser.content_length() && body <= limits_.max_body_bytes)
                    discard_body(c->stream, buffer, body);
                refuse(*c,
                       fmt::format("the server is short of request memory: {} bytes of body x {} = "
                                   "{} bytes needed, {} of server.request_memory {} in use",
                                   body, kRequestMemoryFactor, need, memory_.in_use(),
                                   memory_.total()),
                       target());
                break;
            }
        }
        if (!ec && parser.get()[http::field::expect] == "100-continue") {
            http::response<http::empty_body> go{http::status::continue_, parser.get().version()};
            c->write(go);
        }
        if (!ec && !parser.is_done()) http::read(c->stream, buffer, parser, ec);
        if (ec) {
            // A client that closed between requests is the normal end of keep-alive.
            if (ec == http::error::end_of_stream || ec == boost::asio::error::eof) {
                if (buffer.size() == 0 && !parser.got_some()) break;
            }
            int status = 400;
            std::string why = ec.message();
            if (ec == http::error::header_limit) {
                status = 431;
                why = fmt::format("request headers exceed {} bytes", limits_.max_header_bytes);
            } else if (ec == http::error::body_limit) {
                status = 413;
                why = fmt::format("request body exceeds server.max_body_bytes ({} bytes)",
                                  limits_.max_body_bytes);
            } else if (ec == boost::asio::error::timed_out) {
                status = 408;
                why = fmt::format("the request did not arrive within server.read_timeout ({} s)",
                                  limits_.read_timeout.count());
            } else if (ec == http::error::end_of_stream || ec == boost::asio::error::eof) {
                why = "the client closed the connection inside a request";
            } else if (ec.category() == boost::system::system_category()) {
                break;  // reset, or shut down by stop(): nobody to answer
            } else {
                why = "malformed HTTP: " + why;
            }
            c->keep_alive = false;
            c->version = 11;
            Responder r(*c);
            send_error(r, status, why, {{"Connection", "close"}}, target());
            break;
        }
        const HttpRequest& request = parser.get();
        c->version = request.version();
        c->keep_alive = request.keep_alive();
        c->stream.set_read_deadline(Clock::time_point::max());
        {
            std::lock_guard lock(m_);
            if (stopping_) c->keep_alive = false;
        }
        if (c->probes_only) {
            const std::string_view path(request.target().data(), request.target().size());
            const auto& probes = limits_.probe_targets;
            if (std::find(probes.begin(), probes.end(), path) == probes.end()) {
                refuse(*c,
                       fmt::format("too many open connections (server.max_connections {}); "
                                   "only the probes are answered",
                                   limits_.max_connections),
                       path);
                break;
            }
        }
        const uint64_t charged = charge.bytes();
        Responder responder(*c, &charge);
        {
            std::lock_guard lock(m_);
            ++handling_;
        }
        try {
            handler_(request, responder);
        } catch (const std::exception& e) {
            logger().error("server: handler failed: {}", e.what());
            c->keep_alive = false;
        }
        if (!responder.sent()) {
            c->keep_alive = false;
            send_error(responder, 500, "no response", {}, target());
        }
        // glibc keeps freed memory in each thread's arena: without this, a
        // series of large requests on different connections each leave their
        // peak behind, and the process outgrows the budget that admitted them.
        if (charged >= kTrimAfterBytes) ::malloc_trim(0);
        std::lock_guard lock(m_);
        if (--handling_ == 0) all_closed_.notify_all();
    }
    forget(*c);
}

void HttpServer::stop_accepting() {
    std::lock_guard lock(m_);
    if (listen_fd_ >= 0) ::shutdown(listen_fd_, SHUT_RDWR);
}

void HttpServer::stop(std::chrono::milliseconds grace) {
    {
        std::unique_lock lock(m_);
        stopping_ = true;
        if (listen_fd_ >= 0) ::shutdown(listen_fd_, SHUT_RDWR);
    }
    if (acceptor_.joinable()) acceptor_.join();
    std::unique_lock lock(m_);
    if (listen_fd_ >= 0) {
        ::close(listen_fd_);
        listen_fd_ = -1;
    }
    // Connections stay open until their thread lets go, so shutting one down
    // here never touches a descriptor number that was reused.
    for (auto& [raw, connection] : open_) ::shutdown(connection->stream.fd(), SHUT_RDWR);
    all_closed_.wait_for(lock, grace, [&] { return open_.empty(); });
}

bool HttpServer::wait_handlers_done(std::chrono::milliseconds timeout) {
    std::unique_lock lock(m_);
    return all_closed_.wait_for(lock, timeout, [&] { return handling_ == 0; });
}

size_t HttpServer::open_connections() const {
    std::lock_guard lock(m_);
    return open_.size();
}

}  // namespace ferrox::server
