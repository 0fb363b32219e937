// A connected socket as a Beast SyncReadStream / SyncWriteStream whose reads
// and writes give up at a deadline. Asio's own blocking sockets wait in
// poll() without a timeout, so a client that trickles bytes or stops reading
// would hold its thread forever; here every wait is bounded by the deadline
// that the caller sets per request (read) or per write.
#pragma once

#include <boost/asio/buffer.hpp>
#include <boost/system/error_code.hpp>
#include <chrono>
#include <cstddef>

namespace ferrox::server {

class FdStream {
  public:
    using Clock = std::chrono::steady_clock;
    explicit FdStream(int fd) : fd_(fd) {}

    int fd() const { return fd_; }
    void set_read_deadline(Clock::time_point t) { read_deadline_ = t; }
    void set_write_timeout(std::chrono::milliseconds t) { write_timeout_ = t; }
    // Waits until a byte (or the peer's FIN or reset) can be read, at most
    // until `deadline`; false when the deadline passed first.
    bool wait_readable(Clock::time_point deadline);

    template <class MutableBuffers>
    size_t read_some(const MutableBuffers& buffers, boost::system::error_code& ec) {
        for (auto it = boost::asio::buffer_sequence_begin(buffers);
             it != boost::asio::buffer_sequence_end(buffers); ++it) {
            boost::asio::mutable_buffer b = *it;
            if (b.size() > 0) return read_into(b.data(), b.size(), ec);
        }
        ec = {};
        return 0;
    }
    template <class MutableBuffers>
    size_t read_some(const MutableBuffers& buffers) {
        boost::system::error_code ec;
        const size_t n = read_some(buffers, ec);
        if (ec) throw boost::system::system_error(ec);
        return n;
    }

    template <class ConstBuffers>
    size_t write_some(const ConstBuffers& buffers, boost::system::error_code& ec) {
        for (auto it = boost::asio::buffer_sequence_begin(buffers);
             it != boost::asio::buffer_sequence_end(buffers); ++it) {
            boost::asio::const_buffer b = *it;
            if (b.size() > 0) return write_from(b.data(), b.size(), ec);
        }
        ec = {};
        return 0;
    }
    template <class ConstBuffers>
    size_t write_some(const ConstBuffers& buffers) {
        boost::system::error_code ec;
        const size_t n = write_some(buffers, ec);
        if (ec) throw boost::system::system_error(ec);
        return n;
    }

  private:
    size_t read_into(void* data, size_t size, boost::system::error_code& ec);
    size_t write_from(const void* data, size_t size, boost::system::error_code& ec);

    int fd_;
    Clock::time_point read_deadline_ = Clock::time_point::max();
    std::chrono::milliseconds write_timeout_{30000};
};

}  // namespace ferrox::server
