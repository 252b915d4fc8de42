package dev.compute.memory.cuda;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

import java.lang.foreign.Arena;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.invoke.VarHandle;

/**
 * The driver structs the page-mapping calls take, laid out as {@code cuda.h} declares them (x86-64). Every
 * struct is allocated zeroed: the driver rejects a {@code CUmemAllocationProp} whose reserved bytes are not zero,
 * which is the bug in JCuda 12.6.0's {@code cuMemCreate}.
 */
final class VmmStructs {

    static final int CU_MEM_ALLOCATION_TYPE_PINNED = 1;
    static final int CU_MEM_LOCATION_TYPE_DEVICE = 1;
    static final int CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3;
    static final int CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0;

    /** {@code struct CUmemLocation { CUmemLocationType type; int id; }}: 8 bytes. */
    static final StructLayout MEM_LOCATION = MemoryLayout.structLayout(
            JAVA_INT.withName("type"),
            JAVA_INT.withName("id"));

    /**
     * {@code CUmemAllocationProp}: type, requestedHandleTypes, location, win32HandleMetaData, then the
     * {@code allocFlags} struct (compressionType, gpuDirectRDMACapable, usage, reserved[4]): 32 bytes.
     */
    static final StructLayout ALLOCATION_PROP = MemoryLayout.structLayout(
            JAVA_INT.withName("type"),
            JAVA_INT.withName("requestedHandleTypes"),
            MEM_LOCATION.withName("location"),
            ADDRESS.withName("win32HandleMetaData"),
            MemoryLayout.structLayout(
                    JAVA_BYTE.withName("compressionType"),
                    JAVA_BYTE.withName("gpuDirectRDMACapable"),
                    JAVA_SHORT.withName("usage"),
                    MemoryLayout.sequenceLayout(4, JAVA_BYTE).withName("reserved")).withName("allocFlags"));

    /** {@code CUmemAccessDesc { CUmemLocation location; CUmemAccess_flags flags; }}: 12 bytes. */
    static final StructLayout ACCESS_DESC = MemoryLayout.structLayout(
            MEM_LOCATION.withName("location"),
            JAVA_INT.withName("flags"));

    private static final VarHandle PROP_TYPE = ALLOCATION_PROP.varHandle(MemoryLayout.PathElement.groupElement("type"));
    private static final VarHandle PROP_LOCATION_TYPE = ALLOCATION_PROP.varHandle(
            MemoryLayout.PathElement.groupElement("location"), MemoryLayout.PathElement.groupElement("type"));
    private static final VarHandle PROP_LOCATION_ID = ALLOCATION_PROP.varHandle(
            MemoryLayout.PathElement.groupElement("location"), MemoryLayout.PathElement.groupElement("id"));
    private static final VarHandle DESC_LOCATION_TYPE = ACCESS_DESC.varHandle(
            MemoryLayout.PathElement.groupElement("location"), MemoryLayout.PathElement.groupElement("type"));
    private static final VarHandle DESC_LOCATION_ID = ACCESS_DESC.varHandle(
            MemoryLayout.PathElement.groupElement("location"), MemoryLayout.PathElement.groupElement("id"));
    private static final VarHandle DESC_FLAGS = ACCESS_DESC.varHandle(MemoryLayout.PathElement.groupElement("flags"));

    private VmmStructs() {}

    /** Device memory on {@code device}, pinned (not migratable), everything else zero. */
    static MemorySegment devicePinnedProp(Arena arena, int device) {
        MemorySegment prop = arena.allocate(ALLOCATION_PROP);
        prop.fill((byte) 0);
        PROP_TYPE.set(prop, 0L, CU_MEM_ALLOCATION_TYPE_PINNED);
        PROP_LOCATION_TYPE.set(prop, 0L, CU_MEM_LOCATION_TYPE_DEVICE);
        PROP_LOCATION_ID.set(prop, 0L, device);
        return prop;
    }

    /** Read and write access for {@code device}. */
    static MemorySegment readWriteAccess(Arena arena, int device) {
        MemorySegment desc = arena.allocate(ACCESS_DESC);
        desc.fill((byte) 0);
        DESC_LOCATION_TYPE.set(desc, 0L, CU_MEM_LOCATION_TYPE_DEVICE);
        DESC_LOCATION_ID.set(desc, 0L, device);
        DESC_FLAGS.set(desc, 0L, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
        return desc;
    }
}
