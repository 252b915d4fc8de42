/**
 * Utilities the manager, the resources, the pool and the backends share: thread stripes, striped counters, a ledger
 * of bytes against a limit, and the check that a file is a regular one before it is opened. Public only so that those packages and modules can use them; not an API, and
 * free to change.
 */
@NullMarked
package dev.compute.memory.internal;

import org.jspecify.annotations.NullMarked;
