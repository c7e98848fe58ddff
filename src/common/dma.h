/* dma.h - marks the NIC's own accesses to registered memory for ThreadSanitizer.
 *
 * A peer's WRITE lands in an MR while the owning application may be touching it, and a READ or a
 * SEND reads an MR the application may be filling; on hardware these are DMA, and the order an
 * application relies on comes from the other side (a message, a completion), which TSan cannot
 * see across processes. So in a TSan build the engine's copies into and out of MR memory (and the
 * ICRC and sendmmsg over it) are not checked; every other access, to urnic's own rings, tables
 * and queues, is. In every other build these are no-ops. */
#ifndef URNIC_COMMON_DMA_H
#define URNIC_COMMON_DMA_H

#if defined(__SANITIZE_THREAD__)
void AnnotateIgnoreReadsBegin(const char *file, int line);
void AnnotateIgnoreReadsEnd(const char *file, int line);
void AnnotateIgnoreWritesBegin(const char *file, int line);
void AnnotateIgnoreWritesEnd(const char *file, int line);
#define URNIC_DMA_BEGIN()                                                                          \
	(AnnotateIgnoreReadsBegin(__FILE__, __LINE__), AnnotateIgnoreWritesBegin(__FILE__, __LINE__))
#define URNIC_DMA_END()                                                                            \
	(AnnotateIgnoreWritesEnd(__FILE__, __LINE__), AnnotateIgnoreReadsEnd(__FILE__, __LINE__))
#else
#define URNIC_DMA_BEGIN() ((void)0)
#define URNIC_DMA_END() ((void)0)
#endif

#endif
