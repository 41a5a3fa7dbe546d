/* pd_json: cJSON_PrintUnformatted, the same bytes, without glibc's float formatting for the
 * numbers that are integers. cJSON 1.7.15 prints every number with the "%1.15g" format and
 * reads it back with the "%lg" scan format to check it: about 3,500 instructions per number,
 * a tenth of the simulator's run (issue 30). An integer-valued double below 1e15 in magnitude (and not -0)
 * prints under "%1.15g" as its decimal digits, so pd_json_print writes those digits itself
 * (as a raw item for the duration of the print) and leaves every other number to cJSON.
 * Writes JSON, parses nothing. tests/test_json_print.c and fuzz/fuzz_merge.c hold it to
 * cJSON's own print byte for byte. */
#ifndef PD_JSON_H
#define PD_JSON_H

#include <cjson/cJSON.h>

/* The unformatted text of root (cJSON's allocator: free with cJSON_free), or NULL when out of
 * memory. root is unchanged afterwards (its numbers are raw items only during the print). */
char *pd_json_print(cJSON *root);

#endif
