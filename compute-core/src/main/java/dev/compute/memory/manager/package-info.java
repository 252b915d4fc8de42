/**
 * How the manager works, a part per job: the resource chain of each location and how it is built, the call gate
 * that makes closing safe, where closed buffers' blocks go back, compaction, maintenance, figures, shutdown, the
 * requests waiting for memory, mapped files, budgets' ledgers and the warm-up. {@code PooledMemoryManager} in the
 * API package composes them. Public only so that the API package can use it: not an API, and free to change.
 */
@NullMarked
package dev.compute.memory.manager;

import org.jspecify.annotations.NullMarked;
