"""libstdc++'s heap algorithms (make/push/pop/sort_heap) and std::sort (introsort) on a
Python list, and TensorFlow's gtl::TopN over them. Where TensorFlow's result depends on the
order in which elements that compare equal come out (CTC beam search's TopN,
PriorityQueue's ties, TopKV2 of rows holding NaN), only its exact sequence of comparisons
reproduces it."""

from __future__ import annotations

_SORT_THRESHOLD = 16  # libstdc++'s insertion-sort cutoff inside std::sort


class StdHeap:
    """libstdc++'s heap algorithms (make/push/pop/sort_heap) and std::sort (introsort) on a
    Python list, with ``less(a, b)`` as the comparator."""

    def __init__(self, less) -> None:
        self.less = less

    def adjust(self, v: list, hole: int, n: int, value) -> None:
        top = hole
        child = hole
        while child < (n - 1) // 2:
            child = 2 * (child + 1)
            if self.less(v[child], v[child - 1]):
                child -= 1
            v[hole] = v[child]
            hole = child
        if n % 2 == 0 and child == (n - 2) // 2:
            child = 2 * (child + 1)
            v[hole] = v[child - 1]
            hole = child - 1
        self.push_up(v, hole, top, value)

    def push_up(self, v: list, hole: int, top: int, value) -> None:
        parent = (hole - 1) // 2
        while hole > top and self.less(v[parent], value):
            v[hole] = v[parent]
            hole = parent
            parent = (hole - 1) // 2
        v[hole] = value

    def make(self, v: list, lo: int = 0, hi: int | None = None) -> None:
        hi = len(v) if hi is None else hi
        n = hi - lo
        if n < 2:
            return
        if lo:  # only used on whole lists, but keep the general form simple
            sub = v[lo:hi]
            self.make(sub)
            v[lo:hi] = sub
            return
        parent = (n - 2) // 2
        while True:
            self.adjust(v, parent, n, v[parent])
            if parent == 0:
                return
            parent -= 1

    def pop(self, v: list, n: int) -> None:
        """std::pop_heap on v[:n]: the top moves to v[n - 1]."""
        if n > 1:
            value = v[n - 1]
            v[n - 1] = v[0]
            self.adjust(v, 0, n - 1, value)

    def push(self, v: list, n: int) -> None:
        """std::push_heap on v[:n] (the new element at v[n - 1])."""
        self.push_up(v, n - 1, 0, v[n - 1])

    def sort_heap(self, v: list, lo: int = 0, hi: int | None = None) -> None:
        hi = len(v) if hi is None else hi
        sub = v[lo:hi]
        n = len(sub)
        while n > 1:
            self.pop(sub, n)
            n -= 1
        v[lo:hi] = sub

    def sort(self, v: list) -> None:
        n = len(v)
        if n < 2:
            return
        self._introsort(v, 0, n, 2 * (n.bit_length() - 1))
        if n > _SORT_THRESHOLD:
            self._insertion(v, 0, _SORT_THRESHOLD)
            for i in range(_SORT_THRESHOLD, n):
                self._linear_insert(v, i)
        else:
            self._insertion(v, 0, n)

    def _introsort(self, v: list, lo: int, hi: int, depth: int) -> None:
        less = self.less
        while hi - lo > _SORT_THRESHOLD:
            if depth == 0:
                sub = v[lo:hi]
                self.make(sub)
                self.sort_heap(sub)
                v[lo:hi] = sub
                return
            depth -= 1
            mid = lo + (hi - lo) // 2
            a, b, c = lo + 1, mid, hi - 1
            if less(v[a], v[b]):
                pick = b if less(v[b], v[c]) else (c if less(v[a], v[c]) else a)
            elif less(v[a], v[c]):
                pick = a
            elif less(v[b], v[c]):
                pick = c
            else:
                pick = b
            v[lo], v[pick] = v[pick], v[lo]
            first, last = lo + 1, hi
            while True:
                while less(v[first], v[lo]):
                    first += 1
                last -= 1
                while less(v[lo], v[last]):
                    last -= 1
                if not first < last:
                    break
                v[first], v[last] = v[last], v[first]
                first += 1
            self._introsort(v, first, hi, depth)
            hi = first

    def _insertion(self, v: list, lo: int, hi: int) -> None:
        for i in range(lo + 1, hi):
            if self.less(v[i], v[lo]):
                val = v[i]
                v[lo + 1:i + 1] = v[lo:i]
                v[lo] = val
            else:
                self._linear_insert(v, i)

    def _linear_insert(self, v: list, i: int) -> None:
        val = v[i]
        j = i - 1
        while self.less(val, v[j]):
            v[i] = v[j]
            i = j
            j -= 1
        v[i] = val


class TopN:
    """TF's gtl::TopN: keeps the ``limit`` greatest elements under ``greater``."""

    UNORDERED, BOTTOM_KNOWN, HEAP_SORTED = range(3)

    def __init__(self, limit: int, greater) -> None:
        self.limit = limit
        self.greater = greater
        self.heap = StdHeap(greater)
        self.elements: list = []
        self.state = self.UNORDERED

    def __len__(self) -> int:
        return len(self.elements)

    def push(self, v) -> None:
        el, gt = self.elements, self.greater
        if self.limit == 0:
            return
        if self.state != self.HEAP_SORTED:
            el.append(v)
            if len(el) == self.limit + 1:
                self.heap.make(el)
                self.heap.pop(el, len(el))
                el.pop()
                self.state = self.HEAP_SORTED
            elif self.state == self.UNORDERED or gt(el[-1], el[0]):
                pass
            else:
                el[0], el[-1] = el[-1], el[0]
        elif gt(v, el[0]):
            self.heap.pop(el, len(el))
            el[-1] = v
            self.heap.push(el, len(el))

    def peek_bottom(self):
        el, gt = self.elements, self.greater
        if self.state == self.UNORDERED:
            low = 0
            for i in range(1, len(el)):
                if gt(el[low], el[i]):
                    low = i
            if low:
                el[0], el[low] = el[low], el[0]
            self.state = self.BOTTOM_KNOWN
        return el[0]

    def extract(self) -> list:
        out, self.elements = self.elements, []
        if self.state != self.HEAP_SORTED:
            self.heap.sort(out)
        else:
            self.heap.sort_heap(out)
        self.state = self.UNORDERED
        return out

    def reset(self) -> None:
        self.elements = []
        self.state = self.UNORDERED
