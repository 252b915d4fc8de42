/**
 * Concurrency utilities the manager, the resources and the pool share: thread stripes and striped counters.
 * Public only so that those packages can use them; not an API, and free to change.
 */
@NullMarked
package dev.compute.memory.internal;

import org.jspecify.annotations.NullMarked;
