/**
 * Concurrency utilities the manager, the resources, the pool and the backends share: thread stripes, striped counters
 * and a ledger of bytes against a limit. Public only so that those packages and modules can use them; not an API, and
 * free to change.
 */
@NullMarked
package dev.compute.memory.internal;

import org.jspecify.annotations.NullMarked;
