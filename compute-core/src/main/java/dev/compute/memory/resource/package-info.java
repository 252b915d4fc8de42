/**
 * Composable allocators in the manner of RAPIDS RMM: one small {@link dev.compute.memory.resource.MemoryResource}
 * interface, an upstream that calls the backend, the caching pool, and decorators for statistics, leak
 * tracking and a limit. The manager builds one chain per location.
 */
@NullMarked
package dev.compute.memory.resource;

import org.jspecify.annotations.NullMarked;
