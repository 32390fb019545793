/*
 * bench/cxx_sized.cpp: a larson-style C++ server simulation whose frees are
 * sized deletes, and the hot-path micro loops of C++'s operator new and
 * delete and of C23's free_sized, for bench/cxx.sh.
 *
 *   cxx_sized larson [SCALE]   4 threads; each owns a set of 1,000 message
 *       objects of 12 polymorphic types (24 B to 1 KiB, a quarter with a
 *       std::vector of 1 to 32 tags) and replaces 10,000 random ones per
 *       round; at each barrier the sets move one thread along a ring, so
 *       most objects die in another thread than the one that made them (as
 *       bench/workloads.c's larson does with malloc).  `delete msg` runs
 *       the virtual destructor, which calls the sized operator delete with
 *       the dynamic type's size; std::vector's storage goes back through
 *       std::allocator, sized as well (built with -fsized-deallocation).
 *       SCALE multiplies the 200 rounds.
 *   cxx_sized micro_new N         operator new(64) + operator delete(p, 64)
 *   cxx_sized micro_free_sized N  malloc(64) + free_sized(p, 64)
 *   cxx_sized micro_free N        malloc(64) + free(p)
 *   cxx_sized micro_empty N       the same loop without the calls
 *       N iterations: callgrind runs each twice and takes the difference
 *       per iteration, minus micro_empty's (bench/workloads.c's micro).
 *
 * Prints one line: the workload, a checksum that depends on values only
 * (equal under every allocator), and for larson the wall time in seconds
 * and the peak RSS (getrusage).  A plain program: the allocator comes
 * from LD_PRELOAD.  free_sized is looked up with dlsym (glibc 2.36 has
 * none); an allocator without it makes micro_free_sized exit 2.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <sys/resource.h>

#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

namespace {

[[noreturn]] void die(const char *what) {
	std::fprintf(stderr, "<malloc_prof>: cxx_sized: %s\n", what);
	std::exit(1);
}

struct rng_t {
	uint64_t s;
	uint64_t next() {
		uint64_t z = (s += 0x9e3779b97f4a7c15ull);
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
		return z ^ (z >> 31);
	}
};

uint64_t mix(uint64_t h, uint64_t v) {
	return (h ^ v) * 0x100000001b3ull + (h >> 29);
}

/* ---- the messages ---- */

struct msg_t {
	uint64_t key;
	std::vector<uint32_t> *tags;    /* a quarter of them */
	explicit msg_t(uint64_t k) : key(k), tags(nullptr) {}
	virtual ~msg_t() {
		delete tags;
	}
	virtual uint64_t digest() const = 0;
};

template <std::size_t N> struct payload_t final : msg_t {
	unsigned char data[N];
	explicit payload_t(uint64_t k) : msg_t(k) {
		std::memset(data, static_cast<int>(k & 0xff), N);
		data[N - 1] = static_cast<unsigned char>(k >> 56);
	}
	uint64_t digest() const override {
		return key ^ (static_cast<uint64_t>(data[N - 1]) << 8) ^ N;
	}
};

msg_t *msg_new(rng_t &r) {
	uint64_t x = r.next();
	msg_t *m;
	switch (x % 12) {
	case 0: m = new payload_t<8>(x); break;
	case 1: m = new payload_t<24>(x); break;
	case 2: m = new payload_t<40>(x); break;
	case 3: m = new payload_t<56>(x); break;
	case 4: m = new payload_t<88>(x); break;
	case 5: m = new payload_t<120>(x); break;
	case 6: m = new payload_t<184>(x); break;
	case 7: m = new payload_t<248>(x); break;
	case 8: m = new payload_t<376>(x); break;
	case 9: m = new payload_t<504>(x); break;
	case 10: m = new payload_t<760>(x); break;
	default: m = new payload_t<1000>(x); break;
	}
	if ((x >> 8) % 4 == 0) {
		m->tags = new std::vector<uint32_t>();
		unsigned n = 1 + static_cast<unsigned>((x >> 16) % 32);
		for (unsigned i = 0; i < n; i++)
			m->tags->push_back(static_cast<uint32_t>(x >> i));
	}
	return m;
}

uint64_t msg_read(const msg_t *m) {
	uint64_t d = m->digest();
	if (m->tags != nullptr)
		d = mix(d, m->tags->back() + m->tags->size());
	return d;
}

/* ---- larson ---- */

constexpr unsigned THREADS = 4;
constexpr unsigned SLOTS = 1000;
constexpr unsigned PER_ROUND = 10000;
constexpr unsigned ROUNDS = 200;

struct larson_t {
	pthread_barrier_t barrier;
	uint64_t rounds;
	msg_t *set[THREADS][SLOTS];
};

struct larson_arg_t {
	larson_t *l;
	unsigned index;
	uint64_t cs;
};

/* In round n thread t works on set (t + n) mod 4, which its neighbour
 * had in round n - 1; each thread draws from its own stream and each
 * set sees one thread at a time, so the checksum is the schedule's. */
void *larson_thread(void *arg) {
	larson_arg_t *a = static_cast<larson_arg_t *>(arg);
	larson_t *l = a->l;
	rng_t r{0x1a750 + a->index * 0x9e37ull};
	uint64_t cs = 0;
	for (unsigned k = 0; k < SLOTS; k++)
		l->set[a->index][k] = msg_new(r);
	pthread_barrier_wait(&l->barrier);
	for (uint64_t n = 0; n < l->rounds; n++) {
		msg_t **s = l->set[(a->index + n) % THREADS];
		for (unsigned i = 0; i < PER_ROUND; i++) {
			unsigned k = static_cast<unsigned>(r.next() % SLOTS);
			cs = mix(cs, msg_read(s[k]));
			delete s[k];
			s[k] = msg_new(r);
		}
		pthread_barrier_wait(&l->barrier);
	}
	msg_t **s = l->set[(a->index + l->rounds) % THREADS];
	for (unsigned k = 0; k < SLOTS; k++) {
		cs = mix(cs, msg_read(s[k]));
		delete s[k];
	}
	a->cs = cs;
	return nullptr;
}

void larson(double scale) {
	larson_t *l = new larson_t;
	l->rounds = static_cast<uint64_t>(ROUNDS * scale + 0.5);
	if (l->rounds == 0)
		l->rounds = 1;
	if (pthread_barrier_init(&l->barrier, nullptr, THREADS) != 0)
		die("pthread_barrier_init failed");
	auto t0 = std::chrono::steady_clock::now();
	pthread_t t[THREADS];
	larson_arg_t a[THREADS];
	for (unsigned i = 0; i < THREADS; i++) {
		a[i] = larson_arg_t{l, i, 0};
		if (pthread_create(&t[i], nullptr, larson_thread, &a[i]) != 0)
			die("pthread_create failed");
	}
	uint64_t cs = 0;
	for (unsigned i = 0; i < THREADS; i++) {
		pthread_join(t[i], nullptr);
		cs = mix(cs, a[i].cs);
	}
	double secs = std::chrono::duration<double>(
	    std::chrono::steady_clock::now() - t0).count();
	pthread_barrier_destroy(&l->barrier);
	delete l;
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	std::printf("larson checksum=%016" PRIx64 " time=%.4f rss_kb=%ld\n",
	    cs, secs, ru.ru_maxrss);
}

/* ---- micro loops ---- */

unsigned char empty_buf[64];

enum micro_kind_t { MICRO_NEW, MICRO_FREE_SIZED, MICRO_FREE, MICRO_EMPTY };

using free_sized_t = void (*)(void *, std::size_t);

/* operator delete(p, size); plain delete in a build without sized
 * deallocation (-fno-sized-deallocation, to compare). */
inline void sized_delete(void *p, std::size_t size) {
#ifdef __cpp_sized_deallocation
	::operator delete(p, size);
#else
	(void)size;
	::operator delete(p);
#endif
}

/* One loop body for every kind, so that the kinds differ by the calls
 * alone (the empty one launders a buffer's address instead). */
template <micro_kind_t K> uint64_t micro_loop(uint64_t iters,
    free_sized_t fs) {
	uint64_t cs = 0;
	for (uint64_t i = 0; i < iters; i++) {
		unsigned char *p;
		if (K == MICRO_EMPTY) {
			p = empty_buf;
			__asm__ volatile("" : "+r"(p));
		} else if (K == MICRO_NEW) {
			p = static_cast<unsigned char *>(::operator new(64));
		} else {
			p = static_cast<unsigned char *>(std::malloc(64));
		}
		if (p == nullptr)
			die("out of memory");
		p[0] = static_cast<unsigned char>(i);
		__asm__ volatile("" : : "r"(p) : "memory");
		cs += p[0];
		if (K == MICRO_NEW)
			sized_delete(p, 64);
		else if (K == MICRO_FREE_SIZED)
			fs(p, 64);
		else if (K == MICRO_FREE)
			std::free(p);
	}
	return cs;
}

void micro(const char *name, uint64_t iters) {
	free_sized_t fs = reinterpret_cast<free_sized_t>(
	    dlsym(RTLD_DEFAULT, "free_sized"));
	/* Warm-up: thread caches and slabs set up outside the counted
	 * difference. */
	for (unsigned i = 0; i < 1000; i++)
		sized_delete(::operator new(64), 64);
	uint64_t cs;
	if (std::strcmp(name, "micro_new") == 0) {
		cs = micro_loop<MICRO_NEW>(iters, fs);
	} else if (std::strcmp(name, "micro_free_sized") == 0) {
		if (fs == nullptr) {
			std::fprintf(stderr, "<malloc_prof>: cxx_sized: this "
			    "allocator has no free_sized\n");
			std::exit(2);
		}
		cs = micro_loop<MICRO_FREE_SIZED>(iters, fs);
	} else if (std::strcmp(name, "micro_free") == 0) {
		cs = micro_loop<MICRO_FREE>(iters, fs);
	} else {
		cs = micro_loop<MICRO_EMPTY>(iters, fs);
	}
	std::printf("%s checksum=%016" PRIx64 " iters=%" PRIu64 "\n", name, cs,
	    iters);
}

} // namespace

int main(int argc, char **argv) {
	if (argc < 2)
		die("usage: cxx_sized larson [SCALE] | micro_new|"
		    "micro_free_sized|micro_free|micro_empty N");
	if (std::strcmp(argv[1], "larson") == 0) {
		larson(argc > 2 ? std::atof(argv[2]) : 1.0);
	} else if (std::strncmp(argv[1], "micro_", 6) == 0 && argc > 2) {
		micro(argv[1], std::strtoull(argv[2], nullptr, 10));
	} else {
		die("unknown workload");
	}
	return 0;
}
