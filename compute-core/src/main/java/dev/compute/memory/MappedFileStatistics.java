package dev.compute.memory;

/**
 * The files a manager has mapped ({@link UnifiedMemoryManager#mapFile}), counted apart from its pools: a mapped
 * file's bytes are the file's, paged in and out by the operating system, and never part of a location's allocated,
 * reserved or cached bytes.
 *
 * <ul>
 *   <li>{@code openMappings}, {@code mappedBytes}: mapped now (a buffer closed while a view or device work still
 *       uses it stays mapped until they end);
 *   <li>{@code mappedBytesPeak}: the most bytes mapped at once since the manager started;
 *   <li>{@code mappings}: files (or ranges) mapped since the manager started;
 *   <li>{@code maxOpenMappings}: {@code compute.memory.mapped-files.max-open}, the most that may be mapped at once.
 * </ul>
 */
public record MappedFileStatistics(long openMappings, long mappedBytes, long mappedBytesPeak, long mappings, int maxOpenMappings) {}
