#include "http_server.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

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
    Connection(int fd, const HttpLimits& server_limits) : stream(fd), limits(server_limits) {
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
    bool keep_alive = true;
    unsigned version = 11;
};

std::string error_json(std::string_view message, std::string_view type) {
    nlohmann::json j;
    j["error"] = {{"message", message}, {"type", type}};
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
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

bool Responder::client_gone() const {
    if (failed_) return true;
    pollfd p{connection_.stream.fd(), POLLIN | POLLRDHUP, 0};
    if (::poll(&p, 1, 0) <= 0) return false;
    return (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

HttpServer::HttpServer(HttpLimits limits, Handler handler)
    : limits_(limits), handler_(std::move(handler)) {}

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
        const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
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
        auto connection = std::make_shared<Connection>(fd, limits_);
        std::unique_lock lock(m_);
        if (stopping_) return;
        if (open_.size() >= limits_.max_connections) {
            lock.unlock();
            connection->keep_alive = false;
            Responder r(*connection);
            r.send(503, "application/json", error_json("too many open connections", "unavailable"),
                   {{"Retry-After", "1"}});
            continue;
        }
        open_.emplace(connection.get(), connection);
        lock.unlock();
        std::thread([this, connection]() mutable { serve(std::move(connection)); }).detach();
    }
}

void HttpServer::serve(std::shared_ptr<Connection> c) {
    boost::beast::flat_buffer buffer;
    while (c->keep_alive) {
        c->stream.set_read_deadline(Clock::now() + limits_.read_timeout);
        http::request_parser<http::string_body> parser;
        parser.header_limit(limits_.max_header_bytes);
        parser.body_limit(limits_.max_body_bytes);
        error_code ec;
        http::read_header(c->stream, buffer, parser, ec);
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
            r.send(status, "application/json", error_json(why, "invalid_request_error"),
                   {{"Connection", "close"}});
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
        Responder responder(*c);
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
            responder.send(500, "application/json", error_json("no response", "server_error"));
        }
        std::lock_guard lock(m_);
        if (--handling_ == 0) all_closed_.notify_all();
    }
    std::lock_guard lock(m_);
    open_.erase(c.get());
    if (open_.empty()) all_closed_.notify_all();
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
