/**
 * The books of memory budgets ({@code MemoryBudget} in the API package is the handle users hold): each budget's
 * limits, reservation and figures, the buffers it counts, the walk that checks a request against its budget, every
 * budget above it and the cap, and the queues of requests waiting for a budget's room. Public only so that the API
 * package can use it: not an API, and free to change.
 */
@NullMarked
package dev.compute.memory.budget;

import org.jspecify.annotations.NullMarked;
