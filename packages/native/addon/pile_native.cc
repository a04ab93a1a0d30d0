// @pile/native: the file and memory primitives under Pile's segments.
//
// A Mapping maps a file shared (read-write or read-only) or anonymous memory, and gives it to
// JavaScript as a Buffer whose memory is the mapping. unmap() returns the memory at once and
// leaves zero pages at its addresses, so a view JavaScript still holds never faults (see Region).
//
// The addon is context-aware (Napi::Addon): every worker thread that loads it gets its own
// instance, and nothing here is per-process state.

#include <napi.h>
#include <uv.h>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__linux__) && !defined(MADV_POPULATE_WRITE)
#define MADV_POPULATE_WRITE 23  // Linux 5.14+; older headers lack the constant.
#endif

namespace {

constexpr double kMaxSafeInteger = 9007199254740991.0;

size_t PageSize() {
  return static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

std::string ErrnoName(int err) {
  // libuv's error names are the POSIX errno names (ENOSPC, EACCES, ...).
  return uv_err_name(uv_translate_sys_error(err));
}

Napi::Error ErrnoError(Napi::Env env, int err, const char* syscall, const std::string& label) {
  std::string name = ErrnoName(err);
  std::string message = std::string(syscall) + (label.empty() ? "" : " " + label) + ": " + name + " (" + std::strerror(err) + ")";
  Napi::Error e = Napi::Error::New(env, message);
  e.Set("code", Napi::String::New(env, name));
  e.Set("errno", Napi::Number::New(env, -err));
  e.Set("syscall", Napi::String::New(env, syscall));
  if (!label.empty()) e.Set("path", Napi::String::New(env, label));
  return e;
}

/** A JS number that must be a non-negative safe integer (64-bit lengths and offsets). */
bool ToSize(const Napi::Value& v, uint64_t* out) {
  if (!v.IsNumber()) return false;
  double d = v.As<Napi::Number>().DoubleValue();
  if (!(d >= 0) || d > kMaxSafeInteger || std::floor(d) != d) return false;
  *out = static_cast<uint64_t>(d);
  return true;
}

/**
 * The mapped memory, shared by the Mapping object, the Buffer's finalizer and the jobs running on
 * the libuv pool. Counted by hand rather than with std::shared_ptr, whose atomics would tie the
 * prebuilt binary to a newer glibc (__libc_single_threaded, 2.32) than the platforms it serves.
 *
 * Release() (unmap()) gives the memory back at once by mapping fresh anonymous zero pages over
 * the range (MAP_FIXED): the file's pages, or the anonymous memory, leave the process, while the
 * addresses stay valid for any view JavaScript still holds, which then reads zeros and writes to
 * private pages that reach no file. No fault, and no detached ArrayBuffer: detaching one, anywhere
 * in a process, makes V8 add a check to every typed-array access of optimised code from then on,
 * which cost the pile's typed put and field read 6 to 8 %. The addresses themselves are unmapped by
 * Free(), when the Buffer is collected. Both wait for the jobs running on the range.
 */
struct Region {
  std::mutex mu;
  void* addr;
  size_t length;
  bool released = false;  // unmap() ran: overlay when idle
  bool overlaid = false;
  bool freeing = false;   // the Buffer was collected: munmap when idle
  bool unmapped = false;
  int jobs = 0;
  int refs = 1;

  Region(void* a, size_t l) : addr(a), length(l) {}

  Region* Ref() {
    std::lock_guard<std::mutex> lock(mu);
    refs++;
    return this;
  }
  void Unref() {
    bool last;
    {
      std::lock_guard<std::mutex> lock(mu);
      last = --refs == 0;
    }
    if (last) {
      Free();
      delete this;
    }
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu);
    released = true;
    Settle();
  }
  void Free() {
    std::lock_guard<std::mutex> lock(mu);
    released = freeing = true;
    Settle();
  }
  /** False once released: the job must not start. */
  bool Enter() {
    std::lock_guard<std::mutex> lock(mu);
    if (released) return false;
    jobs++;
    return true;
  }
  void Leave() {
    std::lock_guard<std::mutex> lock(mu);
    jobs--;
    Settle();
  }

 private:
  void Settle() {
    if (jobs > 0 || unmapped) return;
    if (freeing) {
      munmap(addr, length);
      unmapped = true;
    } else if (released && !overlaid) {
      overlaid = true;
      void* p = mmap(addr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
      // Without the overlay, at least drop the pages: a stale access faults them in again from
      // the file (or as zeros), never from unmapped memory.
      if (p == MAP_FAILED) madvise(addr, length, MADV_DONTNEED);
    }
  }
};

/** A counted reference to a Region. */
class RegionRef {
 public:
  RegionRef() = default;
  explicit RegionRef(Region* r) : r_(r) {}
  RegionRef(const RegionRef& o) : r_(o.r_ ? o.r_->Ref() : nullptr) {}
  RegionRef(RegionRef&& o) noexcept : r_(o.r_) { o.r_ = nullptr; }
  RegionRef& operator=(const RegionRef&) = delete;
  RegionRef& operator=(RegionRef&& o) noexcept {
    if (this != &o) {
      if (r_) r_->Unref();
      r_ = o.r_;
      o.r_ = nullptr;
    }
    return *this;
  }
  ~RegionRef() { if (r_) r_->Unref(); }
  Region* operator->() const { return r_; }
  Region& operator*() const { return *r_; }

 private:
  Region* r_ = nullptr;
};

/** The whole pages inside [offset, offset + length) of the region: [from, to). */
void InnerPages(const Region& r, uint64_t offset, uint64_t length, uintptr_t* from, uintptr_t* to) {
  const uintptr_t page = PageSize();
  const uintptr_t base = reinterpret_cast<uintptr_t>(r.addr);
  *from = (base + offset + page - 1) & ~(page - 1);
  *to = (base + offset + length) & ~(page - 1);
}

/** The pages touching [offset, offset + length): [from, to). */
void OuterPages(const Region& r, uint64_t offset, uint64_t length, uintptr_t* from, uintptr_t* to) {
  const uintptr_t page = PageSize();
  const uintptr_t base = reinterpret_cast<uintptr_t>(r.addr);
  *from = (base + offset) & ~(page - 1);
  *to = (base + offset + length + page - 1) & ~(page - 1);
}

/** Faults the pages in for writing on the libuv pool (MADV_POPULATE_WRITE); done(errno) after. */
class PopulateJob : public Napi::AsyncWorker {
 public:
  PopulateJob(Napi::Env env, RegionRef region, uintptr_t from, uintptr_t to)
      : Napi::AsyncWorker(env, "pile:populate"), region_(std::move(region)), from_(from), to_(to) {}
  PopulateJob(Napi::Function done, RegionRef region, uintptr_t from, uintptr_t to)
      : Napi::AsyncWorker(done, "pile:populate"), region_(std::move(region)), from_(from), to_(to) {}

  // A failure is no error for the writer: its own stores then fault the pages in.
  void Execute() override {
    if (!region_->Enter()) {
      result_ = ENXIO;
      return;
    }
#if defined(__linux__)
    result_ = madvise(reinterpret_cast<void*>(from_), to_ - from_, MADV_POPULATE_WRITE) == 0 ? 0 : errno;
#else
    result_ = ENOSYS;
#endif
    region_->Leave();
  }
  void OnOK() override {
    if (!Callback().IsEmpty()) Callback().Call({Napi::Number::New(Env(), result_)});
  }

 private:
  RegionRef region_;
  uintptr_t from_, to_;
  int result_ = 0;
};

/** msync(MS_SYNC) on the libuv pool; settles a promise. */
class SyncJob : public Napi::AsyncWorker {
 public:
  SyncJob(Napi::Env env, RegionRef region, uint64_t offset, uint64_t length, std::string label)
      : Napi::AsyncWorker(env, "pile:sync"), region_(std::move(region)), offset_(offset), length_(length),
        label_(std::move(label)), deferred_(Napi::Promise::Deferred::New(env)) {}

  Napi::Promise Promise() { return deferred_.Promise(); }

  void Execute() override {
    if (!region_->Enter()) {
      result_ = ENXIO;
      return;
    }
    uintptr_t from, to;
    OuterPages(*region_, offset_, length_, &from, &to);
    result_ = to > from && msync(reinterpret_cast<void*>(from), to - from, MS_SYNC) != 0 ? errno : 0;
    region_->Leave();
  }
  void OnOK() override {
    if (result_ == 0) deferred_.Resolve(Env().Undefined());
    else deferred_.Reject(ErrnoError(Env(), result_, "msync", label_).Value());
  }

 private:
  RegionRef region_;
  uint64_t offset_, length_;
  std::string label_;
  Napi::Promise::Deferred deferred_;
  int result_ = 0;
};

/**
 * new Mapping(fd, length, offset, writable, label): a shared mapping of the file open as `fd`
 * (writable false: a private copy-on-write one; fd -1: private anonymous memory). `label` (the file's path) names it in errors.
 */
class Mapping : public Napi::ObjectWrap<Mapping> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "Mapping", {
      InstanceAccessor<&Mapping::GetBuffer>("buffer"),
      InstanceAccessor<&Mapping::GetMapped>("mapped"),
      InstanceAccessor<&Mapping::GetLength>("length"),
      InstanceMethod<&Mapping::Sync>("sync"),
      InstanceMethod<&Mapping::SyncAsync>("syncAsync"),
      InstanceMethod<&Mapping::Advise>("advise"),
      InstanceMethod<&Mapping::Populate>("populate"),
      InstanceMethod<&Mapping::Unmap>("unmap"),
    });
  }

  explicit Mapping(const Napi::CallbackInfo& info) : Napi::ObjectWrap<Mapping>(info) {
    Napi::Env env = info.Env();
    uint64_t length = 0, offset = 0;
    if (info.Length() < 4 || !info[0].IsNumber() || !ToSize(info[1], &length) || !ToSize(info[2], &offset) ||
        !info[3].IsBoolean() || (info.Length() > 4 && !info[4].IsString() && !info[4].IsUndefined())) {
      throw Napi::TypeError::New(env, "new Mapping(fd: integer (-1: anonymous), length: integer > 0, offset: integer >= 0, writable: boolean, label?: string)");
    }
    const int fd = info[0].As<Napi::Number>().Int32Value();
    const bool writable = info[3].As<Napi::Boolean>().Value();
    if (info.Length() > 4 && info[4].IsString()) label_ = info[4].As<Napi::String>().Utf8Value();
    if (length == 0 || length > SIZE_MAX) throw Napi::RangeError::New(env, "Mapping: length must be a positive integer");
    if (offset % PageSize() != 0) throw Napi::RangeError::New(env, "Mapping: offset must be a multiple of the page size");
    // A file mapped for reading only is private and writable: a stray store through a Buffer of a
    // read-only pile then lands in a copy of that page in this process instead of faulting
    // (SIGSEGV), and never reaches the file. Pages it never wrote still show the file's contents.
    const int prot = PROT_READ | PROT_WRITE;
    const int flags = fd < 0 ? MAP_PRIVATE | MAP_ANONYMOUS : writable ? MAP_SHARED : MAP_PRIVATE;
    void* addr = mmap(nullptr, static_cast<size_t>(length), prot, flags, fd < 0 ? -1 : fd, fd < 0 ? 0 : static_cast<off_t>(offset));
    if (addr == MAP_FAILED) throw ErrnoError(env, errno, "mmap", label_);
    region_ = RegionRef(new Region(addr, static_cast<size_t>(length)));

    // The finalizer (the Buffer collected, or the environment torn down) holds its own reference,
    // so the memory is unmapped exactly once, by whichever of it and unmap() comes first.
    auto hint = new RegionRef(region_);
    Napi::Buffer<uint8_t> buf;
    try {
      buf = Napi::Buffer<uint8_t>::New(env, static_cast<uint8_t*>(addr), static_cast<size_t>(length),
          [](Napi::Env, uint8_t*, RegionRef* ref) {
            (*ref)->Free();
            delete ref;
          }, hint);
    } catch (...) {
      delete hint;
      region_->Free();
      throw;
    }
    // Held strongly for the life of this object: the Buffer must not be collected (and unmapped)
    // before JavaScript has taken it from `buffer`.
    buffer_ = Napi::Persistent(buf);
  }

 private:
  Napi::Value GetBuffer(const Napi::CallbackInfo& info) {
    if (buffer_.IsEmpty()) return info.Env().Undefined();
    Napi::Value v = buffer_.Value();
    return v.IsEmpty() ? info.Env().Undefined() : v;
  }
  Napi::Value GetMapped(const Napi::CallbackInfo& info) {
    std::lock_guard<std::mutex> lock(region_->mu);
    return Napi::Boolean::New(info.Env(), !region_->released);
  }
  Napi::Value GetLength(const Napi::CallbackInfo& info) {
    return Napi::Number::New(info.Env(), static_cast<double>(region_->length));
  }

  /** Checks (offset, length) against the mapping; throws otherwise. */
  void Range(const Napi::CallbackInfo& info, const char* what, uint64_t* offset, uint64_t* length) {
    Napi::Env env = info.Env();
    *offset = 0;
    *length = region_->length;
    if (info.Length() > 0 && !info[0].IsUndefined() && !ToSize(info[0], offset)) {
      throw Napi::TypeError::New(env, std::string(what) + ": offset must be a non-negative integer");
    }
    if (info.Length() > 1 && !info[1].IsUndefined()) {
      if (!ToSize(info[1], length)) throw Napi::TypeError::New(env, std::string(what) + ": length must be a non-negative integer");
    } else {
      *length = *offset <= region_->length ? region_->length - *offset : 0;
    }
    if (*offset > region_->length || *length > region_->length - *offset) {
      throw Napi::RangeError::New(env, std::string(what) + ": offset and length must lie within the mapping");
    }
    std::lock_guard<std::mutex> lock(region_->mu);
    if (region_->released) throw Napi::Error::New(env, std::string(what) + ": the mapping was unmapped");
  }

  /** sync(offset?, length?): msync(MS_SYNC) of the pages of that range. */
  void Sync(const Napi::CallbackInfo& info) {
    uint64_t offset, length;
    Range(info, "sync", &offset, &length);
    uintptr_t from, to;
    OuterPages(*region_, offset, length, &from, &to);
    if (to > from && msync(reinterpret_cast<void*>(from), to - from, MS_SYNC) != 0) {
      throw ErrnoError(info.Env(), errno, "msync", label_);
    }
  }

  /** syncAsync(offset?, length?): Promise<void>, msync on the libuv pool. */
  Napi::Value SyncAsync(const Napi::CallbackInfo& info) {
    uint64_t offset, length;
    Range(info, "syncAsync", &offset, &length);
    auto job = new SyncJob(info.Env(), region_, offset, length, label_);
    Napi::Promise p = job->Promise();
    job->Queue();
    return p;
  }

  /** advise(offset, length, advice): madvise of the pages touching that range. */
  void Advise(const Napi::CallbackInfo& info) {
    uint64_t offset, length;
    Range(info, "advise", &offset, &length);
    if (info.Length() < 3 || !info[2].IsNumber()) throw Napi::TypeError::New(info.Env(), "advise: advice must be one of the ADVICE numbers");
    const int advice = info[2].As<Napi::Number>().Int32Value();
    uintptr_t from, to;
    OuterPages(*region_, offset, length, &from, &to);
    if (to > from && madvise(reinterpret_cast<void*>(from), to - from, advice) != 0) {
      throw ErrnoError(info.Env(), errno, "madvise", label_);
    }
  }

  /**
   * populate(offset, length, done?): faults the whole pages of the range in for writing on a
   * libuv worker (MADV_POPULATE_WRITE), then calls done(errno). The content never changes: it
   * does what the writer's own first store would make the kernel do. Returns false (and queues
   * nothing) where the kernel can not, or when the range holds no whole page.
   */
  Napi::Value Populate(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    uint64_t offset, length;
    Range(info, "populate", &offset, &length);
    if (info.Length() > 2 && !info[2].IsFunction() && !info[2].IsUndefined()) {
      throw Napi::TypeError::New(env, "populate: done must be a function");
    }
    if (!PopulateSupported()) return Napi::Boolean::New(env, false);
    uintptr_t from, to;
    InnerPages(*region_, offset, length, &from, &to);
    if (to <= from) return Napi::Boolean::New(env, false);
    PopulateJob* job = info.Length() > 2 && info[2].IsFunction()
        ? new PopulateJob(info[2].As<Napi::Function>(), region_, from, to)
        : new PopulateJob(env, region_, from, to);
    job->Queue();
    return Napi::Boolean::New(env, true);
  }

  /**
   * unmap(): gives the memory back at once (see Region). Views JavaScript still holds stay valid
   * and read zeros; `buffer` is then undefined, and the Buffer is unmapped when collected. Idempotent.
   */
  void Unmap(const Napi::CallbackInfo& info) {
    region_->Release();
    buffer_.Reset();
  }

 public:
  static bool PopulateSupported() {
#if defined(__linux__)
    // The kernel validates the advice before the range: a zero-length call on an aligned address
    // fails only where MADV_POPULATE_WRITE is unknown (Linux before 5.14). Cheap, so not cached.
    return madvise(reinterpret_cast<void*>(PageSize()), 0, MADV_POPULATE_WRITE) == 0;
#else
    return false;
#endif
  }

 private:
  RegionRef region_;
  Napi::Reference<Napi::Buffer<uint8_t>> buffer_;
  std::string label_;
};

class PileNative : public Napi::Addon<PileNative> {
 public:
  PileNative(Napi::Env env, Napi::Object exports) {
    Napi::Object advice = Napi::Object::New(env);
    advice.Set("NORMAL", MADV_NORMAL);
    advice.Set("RANDOM", MADV_RANDOM);
    advice.Set("SEQUENTIAL", MADV_SEQUENTIAL);
    advice.Set("WILLNEED", MADV_WILLNEED);
    advice.Set("DONTNEED", MADV_DONTNEED);
    DefineAddon(exports, {
      InstanceValue("Mapping", Mapping::Define(env), napi_enumerable),
      InstanceValue("ADVICE", advice, napi_enumerable),
      InstanceValue("pageSize", Napi::Number::New(env, static_cast<double>(PageSize())), napi_enumerable),
      InstanceMethod<&PileNative::Reserve>("reserve", napi_enumerable),
      InstanceMethod<&PileNative::PopulateSupportedFn>("populateSupported", napi_enumerable),
    });
  }

 private:
  /**
   * reserve(fd, length): gives the file `length` bytes of allocated disk blocks
   * (posix_fallocate), so writing through a shared mapping never meets a hole the file system
   * would have to allocate on a page fault. Returns 0 or the errno; EOPNOTSUPP, ENOSYS or EINVAL
   * where the file system can not reserve (the caller then writes the file full instead).
   */
  Napi::Value Reserve(const Napi::CallbackInfo& info) {
    uint64_t length = 0;
    if (info.Length() != 2 || !info[0].IsNumber() || !ToSize(info[1], &length)) {
      throw Napi::TypeError::New(info.Env(), "reserve(fd: integer, length: integer >= 0)");
    }
    const int fd = info[0].As<Napi::Number>().Int32Value();
#if defined(__linux__) || defined(__FreeBSD__)
    int err;
    do err = posix_fallocate(fd, 0, static_cast<off_t>(length)); while (err == EINTR);
    return Napi::Number::New(info.Env(), err);
#else
    return Napi::Number::New(info.Env(), EOPNOTSUPP);
#endif
  }

  Napi::Value PopulateSupportedFn(const Napi::CallbackInfo& info) {
    return Napi::Boolean::New(info.Env(), Mapping::PopulateSupported());
  }
};

}  // namespace

NODE_API_ADDON(PileNative)
