/* pd_mock_ledger: the fault ledger the socket mocks of one run share, so that a traffic fault
 * (the scenario's top-level "faults", docs/scenarios.md) strikes exactly one leg whichever
 * mock the gateway sends it to. A file mapped MAP_SHARED by every mock (`pdref mock
 * --fault-ledger FILE`; `pdref conform` makes one per row), holding C11 atomic counters:
 *
 *   bytes 0..7    magic "PDLEDGR1" (set once by the first mock to map the file)
 *   bytes 8..11   the scenario's workload.requests (every mock must agree)
 *   bytes 64..127 owner[16]: per traffic fault, the worker index + 1 a sticky fault stuck to
 *   bytes 128..   count[request][role]: legs of that role of that request that reached a mock
 *
 * Without a file the ledger is private to the process (one mock, or a test). */
#ifndef PD_MOCK_LEDGER_H
#define PD_MOCK_LEDGER_H
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "pd_scenario.h"

#define PD_LEDGER_HEADER_BYTES 128u

typedef struct pd_mock_ledger {
  void *map;
  size_t len;
  uint32_t n_requests;
  _Atomic uint32_t *owner; /* PD_SCENARIO_MAX_TRAFFIC_FAULTS */
  _Atomic uint32_t *count; /* 2 * n_requests */
} pd_mock_ledger_t;

/* Map the ledger for n_requests requests: path NULL for a private one, else the file (made
 * and sized when missing; a file made for another request count is an error). 0, or
 * PD_ERR_IO / PD_ERR_INVAL / PD_ERR_NOMEM with a message in err. */
int pd_mock_ledger_open(pd_mock_ledger_t *l, const char *path, uint32_t n_requests, char *err,
                    size_t errlen);
void pd_mock_ledger_close(pd_mock_ledger_t *l);

/* Count one more leg of role of request (0-based) and return its number (1-based); 0 when
 * the request is unknown or out of range (no traffic fault applies). */
uint32_t pd_mock_ledger_next_leg(pd_mock_ledger_t *l, uint32_t request, pd_role_t role);

#endif
