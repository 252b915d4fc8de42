/**
 * The backend SPI: a {@link dev.compute.memory.spi.ComputeBackendProvider} per backend, found through
 * {@link java.util.ServiceLoader}, creates a {@link dev.compute.memory.spi.ComputeBackend} that hands out raw
 * memory per location, copies bytes, runs the small op set and, where it can, maps pages into reserved ranges.
 */
@NullMarked
package dev.compute.memory.spi;

import org.jspecify.annotations.NullMarked;
