/* pd_err: the one error table of pdref. Every function that can fail returns 0 or one of
 * these negative codes; pd_strerror() names it. Codes at or below PD_ERR_FATAL mean the
 * object that returned them is no longer usable. */
#ifndef PD_ERR_H
#define PD_ERR_H

#define PD_ERR_TABLE(X)                                                     \
  X(PD_ERR_NOMEM, -1, "out of memory")                                      \
  X(PD_ERR_INVAL, -2, "invalid argument")                                   \
  X(PD_ERR_JSON, -3, "malformed JSON")                                      \
  X(PD_ERR_NOT_OBJECT, -4, "JSON body is not an object")                    \
  X(PD_ERR_TOO_LARGE, -5, "input exceeds its limit")                        \
  X(PD_ERR_NOT_FOUND, -6, "no such item")                                   \
  X(PD_ERR_LIMIT, -7, "a named limit was reached")                          \
  X(PD_ERR_ROUTE, -8, "unknown route")                                      \
  X(PD_ERR_NO_WORKER, -9, "no available worker")                            \
  X(PD_ERR_FIELD, -10, "field has the wrong type or value")                 \
  X(PD_ERR_IO, -11, "I/O error")                                            \
  X(PD_ERR_FATAL, -100, "internal invariant broken")

enum {
#define PD_ERR_ENUM(name, val, msg) name = (val),
  PD_ERR_TABLE(PD_ERR_ENUM)
#undef PD_ERR_ENUM
};

/* Human-readable name of an error code; never NULL. */
const char *pd_strerror(int err);

#endif
