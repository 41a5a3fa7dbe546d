/* The shared fault ledger of the socket mocks (pd_mock_ledger.h). */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include "pd_mock_ledger.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pd_err.h"

#define LEDGER_MAGIC 0x31524744454c4450ull /* "PDLEDGR1" little-endian */

typedef struct ledger_head {
  _Atomic uint64_t magic;
  _Atomic uint32_t n_requests;
} ledger_head_t;

_Static_assert(sizeof(ledger_head_t) <= 64, "ledger header fits its 64 bytes");
_Static_assert(64 + PD_SCENARIO_MAX_TRAFFIC_FAULTS * sizeof(uint32_t) <= PD_LEDGER_HEADER_BYTES,
               "owners fit before the counters");

static int fail(char *err, size_t errlen, int code, const char *path, const char *what) {
  snprintf(err, errlen, "fault ledger %s: %s%s%s", path ? path : "(private)", what,
           errno ? ": " : "", errno ? strerror(errno) : "");
  return code;
}

/* Open (or make) the file and grow it to len; never shrinks a file another mock sized. */
static int map_file(pd_mock_ledger_t *l, const char *path, char *err, size_t errlen) {
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return fail(err, errlen, PD_ERR_IO, path, "cannot open");
  struct stat st;
  int rc = fstat(fd, &st) < 0 ? fail(err, errlen, PD_ERR_IO, path, "cannot stat") : 0;
  if (rc == 0 && (uint64_t)st.st_size < l->len && ftruncate(fd, (off_t)l->len) < 0)
    rc = fail(err, errlen, PD_ERR_IO, path, "cannot size");
  if (rc == 0) {
    l->map = mmap(NULL, l->len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (l->map == MAP_FAILED) {
      l->map = NULL;
      rc = fail(err, errlen, PD_ERR_IO, path, "cannot map");
    }
  }
  close(fd);
  return rc;
}

int pd_mock_ledger_open(pd_mock_ledger_t *l, const char *path, uint32_t n_requests, char *err,
                    size_t errlen) {
  memset(l, 0, sizeof *l);
  errno = 0;
  if (n_requests == 0 || n_requests > PD_SCENARIO_MAX_REQUESTS)
    return fail(err, errlen, PD_ERR_INVAL, path, "request count out of range");
  l->len = PD_LEDGER_HEADER_BYTES + 2u * (size_t)n_requests * sizeof(uint32_t);
  l->n_requests = n_requests;
  if (!path) {
    l->map = mmap(NULL, l->len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (l->map == MAP_FAILED) {
      l->map = NULL;
      return fail(err, errlen, PD_ERR_NOMEM, path, "cannot map");
    }
  } else {
    int rc = map_file(l, path, err, errlen);
    if (rc < 0) return rc;
  }
  ledger_head_t *h = l->map;
  uint64_t zero = 0;
  uint32_t none = 0;
  atomic_compare_exchange_strong(&h->magic, &zero, LEDGER_MAGIC);
  atomic_compare_exchange_strong(&h->n_requests, &none, n_requests);
  errno = 0;
  if (atomic_load(&h->magic) != LEDGER_MAGIC || atomic_load(&h->n_requests) != n_requests) {
    pd_mock_ledger_close(l);
    return fail(err, errlen, PD_ERR_INVAL, path, "made for another scenario (magic or request "
                "count differs)");
  }
  l->owner = (_Atomic uint32_t *)((char *)l->map + 64);
  l->count = (_Atomic uint32_t *)((char *)l->map + PD_LEDGER_HEADER_BYTES);
  return 0;
}

void pd_mock_ledger_close(pd_mock_ledger_t *l) {
  if (l->map) munmap(l->map, l->len);
  memset(l, 0, sizeof *l);
}

uint32_t pd_mock_ledger_next_leg(pd_mock_ledger_t *l, uint32_t request, pd_role_t role) {
  if (!l->count || request >= l->n_requests || (unsigned)role > 1) return 0;
  return atomic_fetch_add(&l->count[2u * request + (uint32_t)role], 1u) + 1u;
}
